//! Writes that share their stripes (`Plan::lock_mode`: a write of the user's bytes alone) are
//! safe to run together, and the rule admits no write that is not.
//!
//! Two writes running together on one stripe are modelled as both being planned and executed
//! against the same starting state (each reads what was there before either wrote) and their
//! member writes then landing interleaved: all of one then all of the other, in both orders, and
//! alternating member write by member write. For every pair of overlapping writes over every
//! scheme below, healthy and with every failure set within its tolerance:
//! - when both writes may share their stripes, every interleaving leaves every stripe consistent
//!   (parity, copies) and every byte reading back as one of the two writers' bytes (a byte
//!   only one of them wrote as that writer's);
//! - over the whole matrix, some pair that the rule keeps exclusive does break under an
//!   interleaving (a mirror whose copies disagree, a parity lost), so the checks above can fail
//!   and the rule is not vacuously safe; and some pairs do share, so the rule is not vacuously
//!   exclusive.

mod common;

use common::{failure_sets, geometry, scheme, Harness, Rng};
use layout::{Params, SchemeKind};
use raidcore::{check_consistency, plan_read, plan_write, LockMode, MemArray, Plan, WritePolicy};

const CHUNK: u64 = 4096;

/// The member writes a plan makes when run alone on `mem`: (member, offset, bytes).
fn member_writes(mem: &MemArray, plans: &[Plan], data: &[u8]) -> Vec<(usize, u64, Vec<u8>)> {
    let mut run = mem.clone();
    let mut out = Vec::new();
    for p in plans {
        let at = p.user_offset as usize;
        let mut user = data[at..at + p.buffers[0]].to_vec();
        run.run(p, &mut user).unwrap();
        for w in &p.writes {
            let m = run.members[w.member as usize].as_ref().unwrap();
            let o = w.offset_bytes as usize;
            out.push((
                w.member as usize,
                w.offset_bytes,
                m[o..o + w.data.len].to_vec(),
            ));
        }
    }
    out
}

/// `mem` after `a`'s and `b`'s member writes land in `order` (0: a then b, 1: b then a,
/// 2: alternating).
fn interleave(
    mem: &MemArray,
    a: &[(usize, u64, Vec<u8>)],
    b: &[(usize, u64, Vec<u8>)],
    order: usize,
) -> MemArray {
    let mut seq: Vec<&(usize, u64, Vec<u8>)> = Vec::new();
    match order {
        0 => seq.extend(a.iter().chain(b)),
        1 => seq.extend(b.iter().chain(a)),
        _ => {
            for i in 0..a.len().max(b.len()) {
                seq.extend(a.get(i));
                seq.extend(b.get(i));
            }
        }
    }
    let mut m = mem.clone();
    for (member, off, bytes) in seq {
        let d = m.members[*member].as_mut().unwrap();
        d[*off as usize..*off as usize + bytes.len()].copy_from_slice(bytes);
    }
    m
}

/// Whether the rule lets `plans` share their stripes.
fn shared(plans: &[Plan]) -> bool {
    plans.iter().all(|p| p.lock_mode() == LockMode::Shared)
}

#[derive(Default)]
struct Tally {
    shared_pairs: usize,
    exclusive_broken: usize,
}

/// Checks one pair of overlapping writes on `h` (see the module documentation).
fn check_pair(
    h: &Harness,
    (ao, alen): (u64, u64),
    (bo, blen): (u64, u64),
    seed: u64,
    t: &mut Tally,
) {
    let mut rng = Rng(seed);
    let (ad, bd) = (rng.bytes(alen as usize), rng.bytes(blen as usize));
    let pa = plan_write(&h.geo, &h.state, ao, alen, &WritePolicy::Rmw).unwrap();
    let pb = plan_write(&h.geo, &h.state, bo, blen, &WritePolicy::Rmw).unwrap();
    let (wa, wb) = (
        member_writes(&h.mem, &pa, &ad),
        member_writes(&h.mem, &pb, &bd),
    );
    let both_shared = shared(&pa) && shared(&pb);
    let lo = ao.min(bo);
    let hi = (ao + alen).max(bo + blen);
    for order in 0..3 {
        let m = interleave(&h.mem, &wa, &wb, order);
        let consistent =
            (0..h.geo.cycles()).all(|c| check_consistency(&h.geo, &h.state, &m.members, c).is_ok());
        let mut got = vec![0u8; (hi - lo) as usize];
        let mut run = m.clone();
        for p in plan_read(&h.geo, &h.state, lo, hi - lo).unwrap() {
            let at = p.user_offset as usize;
            run.run(&p, &mut got[at..at + p.buffers[0]]).unwrap();
        }
        let mut bytes_ok = true;
        for (i, &g) in got.iter().enumerate() {
            let x = lo + i as u64;
            let from_a = (ao..ao + alen).contains(&x).then(|| ad[(x - ao) as usize]);
            let from_b = (bo..bo + blen).contains(&x).then(|| bd[(x - bo) as usize]);
            bytes_ok &= from_a == Some(g) || from_b == Some(g);
        }
        if both_shared {
            assert!(
                consistent && bytes_ok,
                "{} failed {:?}: writes {ao}+{alen} and {bo}+{blen} share their stripes, but \
                 interleaving {order} leaves {}",
                h.geo.scheme().name(),
                h.state.failed(),
                if consistent {
                    "bytes neither wrote"
                } else {
                    "a stripe inconsistent"
                }
            );
        } else if !(consistent && bytes_ok) {
            t.exclusive_broken += 1;
        }
    }
    if both_shared {
        t.shared_pairs += 1;
    }
}

#[test]
fn writes_that_share_stripes_are_safe_together_and_no_other_write_shares() {
    let d = |n| Params {
        disks: Some(n),
        ..Params::default()
    };
    let schemes = [
        (SchemeKind::Raid0, d(4)),
        (SchemeKind::Raid1, d(2)),
        (SchemeKind::Raid1, d(3)),
        (SchemeKind::Raid10, d(4)),
        (SchemeKind::Raid5, d(4)),
        (SchemeKind::Raid6, d(5)),
        (
            SchemeKind::RaidPlus,
            Params {
                width: Some(3),
                level: Some(5),
                ..d(5)
            },
        ),
    ];
    // Pairs of (offset, length): the same block, overlapping parts of chunks, a whole chunk
    // beside a block of it, writes across chunks and stripes.
    let c = CHUNK;
    let pairs = [
        ((0, c), (0, c)),
        ((512, 1024), (1024, 1024)),
        ((0, 2 * c), (c, c)),
        ((c / 2, 3 * c), (2 * c, 2 * c + 512)),
        ((3 * c, c), (3 * c + 512, 512)),
    ];
    let mut t = Tally::default();
    let mut seed = 1;
    for (kind, p) in schemes {
        let s = scheme(kind, p);
        let mut sets = vec![vec![]];
        sets.extend(
            failure_sets(&*s, true)
                .into_iter()
                .filter(|f| f.len() <= s.tolerance()),
        );
        let mut base = Harness::new(geometry(s, CHUNK, 6), WritePolicy::Rmw);
        // Something other than zeros on every member first.
        let cap = base.geo.capacity_bytes();
        base.write(0, &Rng(99).bytes(cap as usize));
        for failed in sets {
            let mut h = base.clone();
            for &m in &failed {
                h.fail(m);
            }
            for &(a, b) in &pairs {
                assert!(a.0 + a.1 <= cap && b.0 + b.1 <= cap);
                seed += 1;
                check_pair(&h, a, b, seed, &mut t);
            }
        }
    }
    assert!(t.shared_pairs > 0, "no pair of writes shares its stripes");
    assert!(
        t.exclusive_broken > 0,
        "no exclusive pair breaks when interleaved: the checks cannot tell a wrong rule"
    );
}

//! Verifying a cycle a part at a time (`verify_parts`, `plan_verify_stripes`,
//! `check_verify_stripes`) finds what verifying it whole finds: for RAID5, RAID6, RAID10,
//! RAID+ and random placement (healthy, and with a member failed), with data written through
//! the planner and then some units damaged, the parts of every size from one stripe to the
//! whole cycle cover every stripe once, in order, hold at most the bytes asked (or one
//! stripe), and report the same checked, degraded and inconsistent stripes, by their index in
//! the cycle.

mod common;

use common::{geometry, scheme, Harness, Rng};
use layout::{Params, SchemeKind};
use raidcore::{
    check_verify, check_verify_stripes, plan_verify_cycle, plan_verify_stripes, verify_parts, Plan,
    WritePolicy,
};

const CHUNK: u64 = 512;

/// The buffers of `plan` read from `h`'s members.
fn read(h: &Harness, plan: &Plan) -> Vec<Vec<u8>> {
    let mut bufs: Vec<Vec<u8>> = plan.buffers.iter().map(|&n| vec![0; n]).collect();
    for r in &plan.reads {
        let m = h.mem.members[r.member as usize]
            .as_ref()
            .expect("available");
        let at = r.offset_bytes as usize;
        bufs[r.data.buf][r.data.off..r.data.end()].copy_from_slice(&m[at..at + r.data.len]);
    }
    bufs
}

fn check(kind: SchemeKind, params: Params, fail: Option<u32>) {
    let geo = geometry(scheme(kind, params.clone()), CHUNK, 2);
    let mut h = Harness::new(geo, WritePolicy::Md);
    let mut rng = Rng(0x5eed ^ kind as u64);
    let cap = h.geo.capacity_bytes();
    let data = rng.bytes(cap as usize);
    h.write(0, &data);
    if let Some(d) = fail {
        h.fail(d);
    }
    // Damage a few units: one byte flipped in each.
    let disks = h.mem.members.len();
    for _ in 0..6 {
        let d = rng.below(disks as u64) as usize;
        if let Some(m) = h.mem.members[d].as_mut() {
            let at = rng.below(m.len() as u64) as usize;
            m[at] ^= 0x5a;
        }
    }
    let mut parts_seen = 0;
    for c in 0..h.geo.cycles() {
        let whole_plan = plan_verify_cycle(&h.geo, &h.state, c);
        let whole = check_verify(&h.state, &whole_plan, &read(&h, &whole_plan));
        let stripes = h.state.layout_of(c).stripes.len();
        let stripe_bytes = |s: usize| h.state.layout_of(c).stripes[s].units.len() as u64 * CHUNK;
        for max in [1, CHUNK * 3, CHUNK * 10, u64::MAX] {
            let parts = verify_parts(&h.geo, &h.state, c, max);
            // Every stripe once, in order.
            let flat: Vec<usize> = parts.iter().flat_map(|p| p.clone()).collect();
            assert_eq!(flat, (0..stripes).collect::<Vec<_>>(), "{kind:?} max {max}");
            for p in &parts {
                let bytes: u64 = p.clone().map(stripe_bytes).sum();
                assert!(
                    p.len() == 1 || bytes <= max,
                    "{kind:?} part {p:?}: {bytes} bytes"
                );
            }
            let mut checked = 0;
            let mut degraded = 0;
            let mut inconsistent = Vec::new();
            for p in parts.iter().cloned() {
                let plan = plan_verify_stripes(&h.geo, &h.state, c, p.clone());
                let o = check_verify_stripes(&h.state, &plan, &read(&h, &plan), p);
                checked += o.checked;
                degraded += o.degraded;
                inconsistent.extend(o.inconsistent);
            }
            assert_eq!(
                (checked, degraded, &inconsistent),
                (whole.checked, whole.degraded, &whole.inconsistent),
                "{kind:?} cycle {c}, parts of at most {max} bytes"
            );
            parts_seen += parts.len();
        }
        // The damage is seen at all (a check that finds nothing would pass the rest).
        if c == 0 && fail.is_none() {
            assert!(whole.checked > 0);
        }
    }
    assert!(
        parts_seen > 4 * h.geo.cycles() as usize,
        "{kind:?}: the cycles were never cut"
    );
}

#[test]
fn parts_find_what_the_whole_cycle_finds() {
    let p = |disks: usize| Params {
        disks: Some(disks),
        ..Params::default()
    };
    let mut inconsistent_somewhere = false;
    for (kind, params) in [
        (SchemeKind::Raid5, p(6)),
        (SchemeKind::Raid6, p(7)),
        (SchemeKind::Raid10, p(6)),
        (
            SchemeKind::RaidPlus,
            Params {
                width: Some(4),
                ..p(13)
            },
        ),
        (
            SchemeKind::Random,
            Params {
                width: Some(5),
                level: Some(6),
                ..p(11)
            },
        ),
    ] {
        for fail in [None, Some(1)] {
            check(kind, params.clone(), fail);
        }
        // Damage made some stripe inconsistent in at least one layout (so the comparison
        // above compared findings, not empty lists).
        let geo = geometry(scheme(kind, params.clone()), CHUNK, 2);
        let h = Harness::new(geo, WritePolicy::Md);
        let plan = plan_verify_cycle(&h.geo, &h.state, 0);
        let mut bufs = read(&h, &plan);
        bufs[1][0] ^= 1;
        inconsistent_somewhere |= !check_verify(&h.state, &plan, &bufs).inconsistent.is_empty();
    }
    assert!(inconsistent_somewhere);
}

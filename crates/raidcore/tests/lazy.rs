//! Lazy parity update (seed 002) on MemArray: the FPG of RM2, member I/Os per small write,
//! reads and degraded reads while updates are deferred (never from a stale parity), flushes,
//! and every pair of failures with and without deferred updates at the first failure.

mod common;

use common::{geometry, scheme, sequence, Harness, Req, Rng};
use layout::{Disk, Params, SchemeKind};
use raidcore::{
    plan_flush_cycle, plan_write, plan_write_lazy, CoreError, Geometry, LazyGroups, WritePolicy,
};

fn d(n: usize) -> Params {
    Params {
        disks: Some(n),
        ..Params::default()
    }
}

/// A lazy write through the harness (the shadow gets it eagerly).
fn lazy_write(h: &mut Harness, off: u64, data: &[u8]) -> usize {
    let lw = plan_write_lazy(&h.geo, &h.state, off, data.len() as u64, &h.policy).unwrap();
    h.state.defer(&lw.deferred);
    for p in &lw.plans {
        p.assert_avoids(h.state.failed());
        let at = p.user_offset as usize;
        let mut user = data[at..at + p.buffers[0]].to_vec();
        h.mem.run(p, &mut user).unwrap();
    }
    h.state.deferred_write_done(&lw.deferred);
    for p in plan_write(&h.geo, &h.shadow_state, off, data.len() as u64, &h.policy).unwrap() {
        let at = p.user_offset as usize;
        let mut user = data[at..at + p.buffers[0]].to_vec();
        h.shadow.run(&p, &mut user).unwrap();
    }
    h.model[off as usize..off as usize + data.len()].copy_from_slice(data);
    lw.deferred.len()
}

/// Flushes the whole list; returns how many flush plans ran.
fn flush_all(h: &mut Harness) -> usize {
    let mut ran = 0;
    loop {
        let cycles = h.state.bpgl().flushable_cycles(4);
        if cycles.is_empty() {
            break;
        }
        for c in cycles {
            let f = plan_flush_cycle(&h.geo, &h.state, c)
                .unwrap()
                .expect("a listed cycle has a flush plan");
            f.plan.assert_avoids(h.state.failed());
            h.mem.run(&f.plan, &mut []).unwrap();
            assert_eq!(h.state.flush_done(&f.entries), f.entries.len());
            ran += 1;
        }
    }
    assert!(h.state.bpgl().is_empty());
    ran
}

fn run_lazy(h: &mut Harness, reqs: &[Req]) {
    for r in reqs {
        match r {
            Req::Write { off, data } => {
                lazy_write(h, *off, data);
            }
            Req::Read { off, len } => h.check_read(*off, *len),
        }
    }
}

fn rm2(n: usize) -> Geometry {
    geometry(scheme(SchemeKind::Rm2, d(n)), 512, 3)
}

#[test]
fn rm2_fpg_min_matches_the_seed_formula() {
    for n in 4..=32usize {
        for m in layout::Rm2::supported_m(n) {
            let s = layout::Rm2::with_shape(n, m, 0).unwrap();
            let geo = Geometry::new(std::sync::Arc::new(s), 512, 1 << 20).unwrap();
            let g = LazyGroups::new(&geo);
            let want = if n % 2 == 0 {
                n / 2
            } else {
                n.div_ceil(2) + m - 2
            };
            for c in 0..g.variants() as u64 {
                assert_eq!(g.fpg(c).len(), want, "|FPG_min| for N = {n}, M = {m}");
                assert_eq!(
                    g.fpg(c).len() + g.bpg(c).len(),
                    n,
                    "N = {n}: FPG and BPG split"
                );
            }
            // The seed's Figure 2 (N = 8, M = 3): P0, P2, P4, P6; the next cycle rotates.
            if (n, m) == (8, 3) {
                assert_eq!(g.fpg(0), &[0, 2, 4, 6]);
                assert_eq!(g.fpg(1), &[1, 3, 5, 7]);
            }
            if n % 2 == 0 {
                assert!(g.variants() >= 2, "N = {n}: the FPG rotates over cycles");
            }
            // Every data unit keeps a foreground group.
            g.check(&geo);
        }
    }
}

#[test]
fn p_plus_q_defers_q_and_raid5_defers_nothing() {
    let geo = geometry(scheme(SchemeKind::Raid6, d(6)), 512, 2);
    let g = LazyGroups::new(&geo);
    for s in 0..geo.healthy().stripes.len() {
        let q = g
            .background_parity(0, s)
            .expect("every RAID6 stripe defers Q");
        assert_eq!(geo.role(q), layout::Role::Q);
    }
    let geo5 = geometry(scheme(SchemeKind::Raid5, d(5)), 512, 2);
    let g5 = LazyGroups::new(&geo5);
    assert!(!g5.supported());
    let mut st = raidcore::ArrayState::new(&geo5);
    let lw = plan_write_lazy(&geo5, &st, 0, 512, &WritePolicy::Md).unwrap();
    assert!(lw.deferred.is_empty());
    assert_eq!(st.defer(&lw.deferred), 0);
    assert_eq!(st.fault_tolerance(&geo5), 1);
}

/// One full-chunk write to a healthy array: member I/Os under each policy.
fn ios_per_write(geo: &Geometry, chunk_index: u64) -> (u64, u64) {
    let st = raidcore::ArrayState::new(geo);
    let cb = geo.chunk_bytes();
    let eager = plan_write(geo, &st, chunk_index * cb, cb, &WritePolicy::Rmw).unwrap();
    let lazy = plan_write_lazy(geo, &st, chunk_index * cb, cb, &WritePolicy::Rmw).unwrap();
    let count = |ps: &[raidcore::Plan]| {
        ps.iter()
            .map(|p| p.io_counts().reads + p.io_counts().writes)
            .sum::<u64>()
    };
    (count(&eager), count(&lazy.plans))
}

#[test]
fn small_writes_cost_four_member_ios_instead_of_six() {
    for n in [6usize, 8, 10] {
        let geo = rm2(n);
        let g = LazyGroups::new(&geo);
        for i in 0..geo.data_per_cycle() {
            let (e, l) = ios_per_write(&geo, i);
            assert_eq!(e, 6, "RM2 N={n} chunk {i} eager");
            // Even N: every data unit is in one FPG and one BPG group.
            assert_eq!(l, 4, "RM2 N={n} chunk {i} lazy (fpg {:?})", g.fpg(0));
        }
    }
    let geo = geometry(scheme(SchemeKind::Raid6, d(6)), 512, 1);
    let (e, l) = ios_per_write(&geo, 1);
    assert_eq!((e, l), (6, 4), "RAID6 RMW: 3+3 eager, 2+2 lazy");
    let p = Params {
        width: Some(4),
        level: Some(6),
        ..d(7)
    };
    let geo = geometry(scheme(SchemeKind::RaidPlus, p), 512, 1);
    let (e, l) = ios_per_write(&geo, 0);
    assert_eq!((e, l), (6, 4), "RAID+ level 6 RMW");
}

#[test]
fn fault_tolerance_and_bound() {
    let geo = rm2(8);
    let mut h = Harness::new(geo.clone(), WritePolicy::Md);
    assert_eq!(h.state.fault_tolerance(&geo), 2);
    h.state.set_bpgl_capacity(3);
    let cb = geo.chunk_bytes();
    let data = vec![5u8; cb as usize];
    assert_eq!(lazy_write(&mut h, 0, &data), 1);
    assert_eq!(h.state.fault_tolerance(&geo), 1);
    // Writing the same chunk again lists nothing new.
    let lw = plan_write_lazy(&geo, &h.state, 0, cb, &h.policy).unwrap();
    assert_eq!(h.state.defer(&lw.deferred), 0);
    h.state.deferred_write_done(&lw.deferred);
    // Fill the bound; a write that would exceed it is planned eagerly.
    let mut i = 1;
    while h.state.bpgl().len() < 3 {
        lazy_write(&mut h, i * cb, &data);
        i += 1;
    }
    let before = h.state.bpgl().len();
    let mut off = i * cb;
    loop {
        let lw = plan_write_lazy(&geo, &h.state, off, cb, &h.policy).unwrap();
        let pending: Vec<_> = lw
            .deferred
            .iter()
            .filter(|s| !h.state.bpgl().contains(**s))
            .collect();
        if lw.deferred.is_empty() {
            break;
        }
        assert!(pending.is_empty(), "the bound is exceeded");
        off += cb;
    }
    assert_eq!(h.state.bpgl().len(), before);
    flush_all(&mut h);
    assert_eq!(h.state.fault_tolerance(&geo), 2);
    h.check_consistent();
    h.check_all_reads();
}

#[test]
fn a_flush_planned_before_a_new_deferral_keeps_the_entry() {
    let geo = rm2(6);
    let mut h = Harness::new(geo.clone(), WritePolicy::Md);
    let cb = geo.chunk_bytes();
    lazy_write(&mut h, 0, &vec![1u8; cb as usize]);
    let f = plan_flush_cycle(&geo, &h.state, 0).unwrap().unwrap();
    // A lazy write to the same stripes is planned (and listed) before the flush completes.
    let lw = plan_write_lazy(&geo, &h.state, 0, cb, &h.policy).unwrap();
    h.state.defer(&lw.deferred);
    // While it is in flight no flush is offered for its cycle.
    assert!(h.state.bpgl().flushable_cycles(10).is_empty());
    h.mem.run(&f.plan, &mut []).unwrap();
    assert_eq!(
        h.state.flush_done(&f.entries),
        0,
        "re-deferred entries stay"
    );
    h.state.deferred_write_done(&lw.deferred);
    assert_eq!(h.state.bpgl().flushable_cycles(10), vec![0]);
}

/// Deferred updates, then every pair of failures: the first failure with updates pending
/// (degraded reads must use the foreground parity only), a degraded write, the flush, then the
/// second failure; every byte read back against the model. Also the same pairs with a clean
/// list at the first failure.
fn all_pairs(geo: Geometry, seed: u64) {
    let mut base = Harness::new(geo.clone(), WritePolicy::Md);
    run_lazy(&mut base, &sequence(&geo, seed, 40));
    assert!(
        !base.state.bpgl().is_empty(),
        "the sequence defers something"
    );
    assert_eq!(base.state.fault_tolerance(&geo), 1);
    base.check_consistent();
    base.check_all_reads();
    let n = geo.disks() as Disk;
    let mut rng = Rng(seed ^ 0xABCD);
    for pending in [true, false] {
        let mut start = base.clone();
        if !pending {
            flush_all(&mut start);
            start.check_consistent();
        }
        for a in 0..n {
            let mut h1 = start.clone();
            h1.fail(a);
            h1.check_all_reads();
            // A degraded write while updates may still be deferred.
            let cap = geo.capacity_bytes();
            let off = rng.below(cap - 600);
            let len = 1 + rng.below(600) as usize;
            let data = rng.bytes(len);
            lazy_write(&mut h1, off, &data);
            h1.check_read(off, data.len() as u64);
            flush_all(&mut h1);
            assert_eq!(
                h1.state.fault_tolerance(&geo),
                1,
                "one failure, list flushed"
            );
            h1.check_consistent();
            for b in 0..n {
                if b == a {
                    continue;
                }
                let mut h2 = h1.clone();
                h2.fail(b);
                h2.check_all_reads();
            }
        }
    }
}

#[test]
fn rm2_every_pair_with_and_without_deferred_updates() {
    for n in 5..=10 {
        all_pairs(rm2(n), n as u64);
    }
}

#[test]
fn raid6_and_raidplus6_every_pair_with_deferred_updates() {
    all_pairs(geometry(scheme(SchemeKind::Raid6, d(6)), 512, 3), 61);
    let p = Params {
        width: Some(4),
        level: Some(6),
        ..d(7)
    };
    all_pairs(geometry(scheme(SchemeKind::RaidPlus, p), 512, 1), 62);
}

#[test]
fn rebuild_recomputes_deferred_parity() {
    let geo = rm2(7);
    let mut h = Harness::new(geo.clone(), WritePolicy::Md);
    run_lazy(&mut h, &sequence(&geo, 9, 30));
    assert!(!h.state.bpgl().is_empty());
    h.fail(3);
    h.replace(3);
    h.rebuild(raidcore::RebuildOrder::Sequential);
    assert!(
        h.state.bpgl().is_empty(),
        "rebuilt cycles drop their entries"
    );
    h.check_consistent();
    h.check_all_reads();
    h.compare_with_shadow();
}

#[test]
fn a_second_failure_before_the_flush_can_lose_data_and_says_so() {
    // Not a guarantee the array gives (one failure is tolerated while updates are deferred);
    // the planner must refuse rather than return wrong bytes.
    let geo = geometry(scheme(SchemeKind::Raid6, d(4)), 512, 1);
    let mut h = Harness::new(geo.clone(), WritePolicy::Md);
    let cb = geo.chunk_bytes();
    lazy_write(&mut h, 0, &vec![9u8; cb as usize]);
    // RAID6 on 4 disks: stripe 0 holds 2 data units, P and Q. Fail both data members.
    let st = &geo.healthy().stripes[0];
    let (d0, d1) = (st.units[0].disk, st.units[1].disk);
    h.fail(d0);
    h.state.fail(&geo, d1).unwrap();
    h.mem.remove(d1);
    match h.try_read(0, cb) {
        Err(CoreError::DataLost { .. }) => {}
        other => panic!("expected DataLost, got {other:?}"),
    }
}

/// Issue 21, defect 2: a flush is planned; a write is planned while its stripe is listed and
/// the list is full, so it falls back to eager parity and, the listed Q being stale, leaves Q
/// alone (and is not counted in flight); the flush then runs and drops the entry. The write's
/// plan must no longer be current: run as planned, it would write data and P, leave Q stale,
/// and nothing would list the stripe (a second failure then reconstructs wrong bytes).
#[test]
fn a_write_planned_against_a_listed_stripe_goes_stale_when_a_flush_drops_the_entry() {
    let geo = geometry(scheme(SchemeKind::Raid6, d(5)), 512, 4);
    let mut h = Harness::new(geo.clone(), WritePolicy::Md);
    h.state.set_bpgl_capacity(1);
    // Stripe 0 of cycle 0 listed; the list is full.
    assert_eq!(lazy_write(&mut h, 0, &[1u8; 512]), 1);
    let flush = plan_flush_cycle(&geo, &h.state, 0)
        .unwrap()
        .expect("listed");
    // 1024..2048 covers the end of stripe 0 (listed) and the start of stripe 1 (no room):
    // the cycle falls back to eager parity.
    let data = vec![3u8; 1024];
    let lw = plan_write_lazy(&geo, &h.state, 1024, 1024, &h.policy).unwrap();
    assert!(lw.deferred.is_empty(), "eager fallback expected");
    let w = lw.plans[0].clone();
    assert!(h.state.plan_is_current(&w));
    // The flush wins the race for the stripe locks.
    h.mem.run(&flush.plan, &mut []).unwrap();
    assert_eq!(h.state.flush_done(&flush.entries), 1);
    assert!(h.state.bpgl().is_empty());
    assert!(
        !h.state.plan_is_current(&w),
        "the write was planned with Q stale; the flush made Q current and dropped the entry"
    );
    // What the check prevents: run as planned, the write leaves Q stale in an unlisted stripe.
    let mut wrong = h.mem.clone();
    wrong.run(&w, &mut data.clone()).unwrap();
    assert!(
        raidcore::mem::check_consistency(&geo, &h.state, &wrong.members, 0).is_err(),
        "the stale plan leaves stripe 0 inconsistent"
    );
    // Planned again, it is eager and complete.
    let again = plan_write_lazy(&geo, &h.state, 1024, 1024, &h.policy).unwrap();
    h.state.defer(&again.deferred);
    for p in &again.plans {
        assert!(h.state.plan_is_current(p));
        let at = p.user_offset as usize;
        h.mem
            .run(p, &mut data[at..at + p.buffers[0]].to_vec())
            .unwrap();
    }
    h.state.deferred_write_done(&again.deferred);
    flush_all(&mut h);
    raidcore::mem::check_consistency(&geo, &h.state, &h.mem.members, 0).unwrap();
}

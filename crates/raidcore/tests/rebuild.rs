//! Rebuild scheduling and event sequences: parallel hand-out, target changes mid-rebuild,
//! aborts, foreground writes between rebuild steps, swaps through a spare, replacements before
//! a rebuild, and where a declustered layout's rebuild I/O lands.

mod common;

use std::collections::BTreeSet;

use common::{geometry, scheme, sequence, Harness};
use layout::{Params, SchemeKind};
use raidcore::{
    plan_rebuild_cycle, RebuildOrder, RebuildScheduler, SpeedLimits, StripeLocks, WritePolicy,
};

fn harness(kind: SchemeKind, p: Params, cycles: u64) -> Harness {
    Harness::new(geometry(scheme(kind, p), 512, cycles), WritePolicy::Md)
}

fn d(n: usize) -> Params {
    Params {
        disks: Some(n),
        ..Params::default()
    }
}

#[test]
fn parallel_hands_out_independent_plans_and_tracks_progress() {
    let mut h = harness(SchemeKind::Raid5, Params { spares: 1, ..d(6) }, 10);
    h.run(&sequence(&h.geo, 1, 20));
    h.fail(3);
    let mut sched = RebuildScheduler::new(
        RebuildOrder::Parallel { max_in_flight: 4 },
        SpeedLimits::default(),
    );
    let batch = sched.next_plans(&h.geo, &h.state).unwrap();
    assert_eq!(batch.len(), 4);
    // Nothing more until something completes.
    assert!(sched.next_plans(&h.geo, &h.state).unwrap().is_empty());
    let cycles: BTreeSet<u64> = batch.iter().map(|p| p.cycle).collect();
    assert_eq!(cycles.len(), 4);
    // Independent: an executor can hold all their locks at once.
    let mut locks = StripeLocks::new();
    for p in &batch {
        assert!(locks.try_lock(&p.locks));
    }
    // Abort one: it is handed out again.
    sched.abort(&batch[1]);
    let again = sched.next_plans(&h.geo, &h.state).unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].cycle, batch[1].cycle);
    let mut written = 0;
    for p in batch
        .iter()
        .filter(|p| p.cycle != batch[1].cycle)
        .chain(&again)
    {
        h.mem.run(p, &mut []).unwrap();
        sched.complete(&mut h.state, p);
        written += p.io_counts().write_bytes;
    }
    let prog = sched.progress(&h.geo, &h.state);
    assert_eq!(
        (prog.cycles_done, prog.cycles_total, prog.in_flight),
        (4, 10, 0)
    );
    assert_eq!(prog.bytes_rebuilt, written);
    assert_eq!(written, 4 * 5 * 512);
    // Foreground writes while half rebuilt land in whichever layout their cycle is in.
    h.run(&sequence(&h.geo, 2, 20));
    h.rebuild(RebuildOrder::Parallel { max_in_flight: 3 });
    h.check_all_reads();
    h.check_consistent();
}

#[test]
fn a_second_failure_mid_rebuild_retargets() {
    let mut h = harness(SchemeKind::Raid6, d(6), 6);
    h.run(&sequence(&h.geo, 3, 20));
    h.fail(0);
    h.replace(0);
    let mut sched = RebuildScheduler::new(RebuildOrder::Sequential, SpeedLimits::default());
    for _ in 0..3 {
        let plans = sched.next_plans(&h.geo, &h.state).unwrap();
        assert_eq!(plans.len(), 1);
        h.mem.run(&plans[0], &mut []).unwrap();
        sched.complete(&mut h.state, &plans[0]);
    }
    // Half the cycles are rebuilt onto the replacement; now another member fails.
    h.fail(4);
    h.run(&sequence(&h.geo, 4, 10));
    h.check_all_reads();
    h.replace(4);
    h.rebuild(RebuildOrder::Sequential);
    h.check_all_reads();
    h.check_consistent();
    h.compare_with_shadow();
}

#[test]
fn swap_through_the_spare() {
    // RAID5 with a spare: disk 1 fails and is rebuilt onto the spare; then disk 2 fails. The
    // layout crate cannot relocate two data failures (the target is blocked), but every cycle
    // is readable: disk 1's units live on the spare. After disk 1 is replaced, the rebuild
    // copies disk 1's units back from the spare and rebuilds disk 2's units onto the spare.
    // Not in one plan: its writes to the spare would overwrite disk 1's units there, which
    // the cycle's layout still reads until the move is recorded (a crash or a failed write
    // between the two would leave neither layout whole). Each cycle stops in a staging
    // layout (disk 1 copied back, disk 2 unreadable) and moves on into the freed spare.
    let mut h = harness(SchemeKind::Raid5, Params { spares: 1, ..d(6) }, 4);
    h.run(&sequence(&h.geo, 5, 25));
    h.fail(1);
    h.rebuild(RebuildOrder::Sequential);
    let out = h.state.fail(&h.geo, 2).unwrap();
    h.mem.remove(2);
    assert!(!out.data_lost, "every cycle is rebuilt, so nothing is lost");
    assert!(out.blocked.is_some());
    h.check_all_reads();
    h.run(&sequence(&h.geo, 6, 10));
    h.replace(1);
    let target = h.state.target_generation();
    assert_eq!(h.state.staging_before(target), Some(target - 1));
    assert!(h.state.move_overwrites_live(0, target));
    let plan = plan_rebuild_cycle(&h.geo, &h.state, 0).unwrap().unwrap();
    let spare_reads = plan.reads.iter().filter(|r| r.member == 5).count();
    let spare_writes = plan.writes.iter().filter(|w| w.member == 5).count();
    assert!(
        spare_reads > 0 && spare_writes == 0 && plan.writes.iter().all(|w| w.member == 1),
        "the copy-back reads the spare and writes only disk 1"
    );
    assert_eq!(
        plan.kind,
        raidcore::PlanKind::Rebuild {
            from: h.state.cycle_generation(0),
            to: target - 1
        }
    );
    h.rebuild(RebuildOrder::Parallel { max_in_flight: 2 });
    assert!(h.state.all_clean());
    h.check_all_reads();
    h.check_consistent();
    h.replace(2);
    h.rebuild(RebuildOrder::Sequential);
    h.check_all_reads();
    h.compare_with_shadow();
}

#[test]
fn replacement_before_any_rebuild_and_garbage_on_the_new_member() {
    // Replace a member before the rebuild to the spare ran: cycles still in generation 0 treat
    // the new member as holding nothing and rebuild onto it. The new member starts as garbage;
    // RAID5 without spare rows uses every byte, so it must end byte-identical.
    let mut h = harness(SchemeKind::Raid5, Params { spares: 1, ..d(6) }, 3);
    h.run(&sequence(&h.geo, 7, 20));
    h.fail(4);
    h.state.replace(&h.geo, 4).unwrap();
    h.mem.insert(4, h.geo.member_bytes_used(), 0xA5);
    h.replaced.push(4);
    h.check_all_reads();
    h.run(&sequence(&h.geo, 8, 10));
    h.rebuild(RebuildOrder::Sequential);
    h.check_all_reads();
    h.check_consistent();
    let mut g = harness(SchemeKind::Raid5, d(5), 3);
    g.run(&sequence(&g.geo, 9, 20));
    g.fail(0);
    g.state.replace(&g.geo, 0).unwrap();
    g.mem.insert(0, g.geo.member_bytes_used(), 0xA5);
    g.replaced.push(0);
    g.rebuild(RebuildOrder::Sequential);
    g.compare_with_shadow();
}

#[test]
fn raidplus_rebuild_spreads_over_every_survivor() {
    // RAID+ (n = 5, k = 3): after one failure, rebuild reads and writes land on all four
    // survivors (the declustering that makes it fast); RAID5 writes only the replacement.
    let mut h = harness(
        SchemeKind::RaidPlus,
        Params {
            width: Some(3),
            ..d(5)
        },
        2,
    );
    h.run(&sequence(&h.geo, 10, 10));
    h.fail(0);
    let plan = plan_rebuild_cycle(&h.geo, &h.state, 0).unwrap().unwrap();
    let per = plan.per_member();
    assert_eq!(per.len(), 4);
    for (m, c) in &per {
        assert!(*m != 0 && c.reads > 0 && c.writes > 0, "member {m}: {c:?}");
    }
}

#[test]
fn rm2_double_failure_peels() {
    // RM2 over 8 disks, two adjacent members fail: some parity group loses two units and is
    // only rebuilt after other groups have rebuilt one of them (peeling).
    let mut h = harness(SchemeKind::Rm2, d(8), 2);
    h.run(&sequence(&h.geo, 11, 20));
    h.fail(0);
    h.fail(1);
    let plans = raidcore::plan_read(&h.geo, &h.state, 0, h.geo.capacity_bytes()).unwrap();
    let recovers = plans[0]
        .ops
        .iter()
        .filter(|o| matches!(o, raidcore::Op::XorRecover { .. }))
        .count();
    assert!(recovers >= 4, "{recovers}");
    h.check_all_reads();
    h.rebuild(RebuildOrder::Sequential);
    h.check_all_reads();
    h.check_consistent();
    h.compare_with_shadow();
}

#[test]
fn spare_fails_after_taking_over() {
    // Disk 0's units are rebuilt onto the spare (5); then the spare fails. Nothing is lost
    // (each stripe misses one unit), but the only place left for disk 0's units is disk 0
    // itself: the rebuild asks for its replacement, then rebuilds onto it.
    let mut h = harness(SchemeKind::Raid5, Params { spares: 1, ..d(6) }, 3);
    h.run(&sequence(&h.geo, 12, 20));
    h.fail(0);
    h.rebuild(RebuildOrder::Sequential);
    assert!(
        h.replaced.is_empty(),
        "rebuilt onto the spare, no replacement needed"
    );
    h.fail(5);
    h.check_all_reads();
    assert_eq!(
        plan_rebuild_cycle(&h.geo, &h.state, 0).unwrap_err(),
        raidcore::CoreError::NeedsReplacement { member: 0 }
    );
    h.run(&sequence(&h.geo, 13, 10));
    h.rebuild(RebuildOrder::Sequential);
    assert_eq!(h.replaced, vec![0]);
    h.check_all_reads();
    h.check_consistent();
    h.replace(5);
    h.rebuild(RebuildOrder::Sequential);
    h.compare_with_shadow();
}

#[test]
fn plans_in_flight_across_an_event() {
    // Two rebuild plans are in flight when another member fails. A plan that touches the new
    // failure fails and is aborted; one that does not completes toward the old target. Either
    // way the scheduler rebuilds the cycle again toward the new target.
    // RAID5 over 5 disks plus spares 5 and 6: disk 0 is rebuilt onto spare 5, then the idle
    // spare 6 (untouched by the plans) fails. RAID6 over 6 disks plus spare 6: then disk 3,
    // which the plans read, fails.
    let cases = [
        (SchemeKind::Raid5, Params { spares: 2, ..d(7) }, 6, 2),
        (SchemeKind::Raid6, Params { spares: 1, ..d(7) }, 3, 0),
    ];
    for (kind, params, second, want_completed) in cases {
        let mut h = harness(kind, params, 6);
        h.run(&sequence(&h.geo, 14, 20));
        h.fail(0);
        let mut sched = RebuildScheduler::new(
            RebuildOrder::Parallel { max_in_flight: 2 },
            SpeedLimits::default(),
        );
        let batch = sched.next_plans(&h.geo, &h.state).unwrap();
        assert_eq!(batch.len(), 2);
        h.fail(second);
        let mut completed = 0;
        for p in &batch {
            assert!(
                !h.state.plan_is_current(p),
                "an event makes every plan stale"
            );
            match h.mem.run(p, &mut []) {
                Ok(()) => {
                    sched.complete(&mut h.state, p);
                    assert!(!h.state.is_clean(p.cycle), "still short of the new target");
                    completed += 1;
                }
                Err(raidcore::MemError::MissingMember { member }) => {
                    assert_eq!(member, second);
                    sched.abort(p);
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(completed, want_completed);
        let mut rounds = 0;
        while !sched.is_finished(&h.state) {
            rounds += 1;
            assert!(rounds < 100, "stalled");
            let plans = match sched.next_plans(&h.geo, &h.state) {
                Ok(p) => p,
                Err(raidcore::CoreError::NeedsReplacement { member }) => {
                    h.replace(member);
                    continue;
                }
                Err(e) => panic!("{e}"),
            };
            assert!(!plans.is_empty() || sched.is_finished(&h.state), "stalled");
            for p in &plans {
                h.mem.run(p, &mut []).unwrap();
                sched.complete(&mut h.state, p);
            }
        }
        h.check_all_reads();
        h.check_consistent();
    }
}

#[test]
fn completion_toward_an_old_target_is_redone() {
    // Cycles 0..3 are in flight; an event changes the target; the scheduler hands out more
    // work (moving past cycle 0, still in flight); then cycle 0 completes toward the old
    // target. It must be rebuilt again, or the rebuild would stall short of the target.
    let mut h = harness(SchemeKind::Raid5, Params { spares: 2, ..d(7) }, 6);
    h.run(&sequence(&h.geo, 15, 20));
    h.fail(0);
    let mut sched = RebuildScheduler::new(
        RebuildOrder::Parallel { max_in_flight: 3 },
        SpeedLimits::default(),
    );
    let batch = sched.next_plans(&h.geo, &h.state).unwrap();
    assert_eq!(
        batch.iter().map(|p| p.cycle).collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
    h.fail(6);
    h.mem.run(&batch[2], &mut []).unwrap();
    sched.complete(&mut h.state, &batch[2]);
    let more = sched.next_plans(&h.geo, &h.state).unwrap();
    assert_eq!(more.len(), 1);
    for p in batch[..2].iter().chain(&more) {
        h.mem.run(p, &mut []).unwrap();
        sched.complete(&mut h.state, p);
    }
    let mut rounds = 0;
    while !sched.is_finished(&h.state) {
        rounds += 1;
        let plans = sched.next_plans(&h.geo, &h.state).unwrap();
        assert!(!plans.is_empty() && rounds < 100, "rebuild stalled");
        for p in &plans {
            h.mem.run(p, &mut []).unwrap();
            sched.complete(&mut h.state, p);
        }
    }
    h.check_all_reads();
    h.check_consistent();
}

/// Every relocating layout, every ordered pair of members: `a` fails and is rebuilt into the
/// spare room, `b` fails (and is rebuilt into the spare room too where the code relocates
/// two failures), `a` comes back (a replacement), then `b`. No rebuild plan writes a
/// unit its cycle's recorded layout still reads (the harness reads each cycle between a
/// plan's writes and its record), and everything reads back at the end.
#[test]
fn sequential_failures_then_replacements_never_overwrite_what_a_cycle_reads() {
    let layouts: Vec<(SchemeKind, Params)> = vec![
        (SchemeKind::Raid5, Params { spares: 1, ..d(5) }),
        (
            SchemeKind::Hash,
            Params {
                width: Some(3),
                seed: 5,
                stripes: Some(12),
                ..d(6)
            },
        ),
        (
            SchemeKind::RaidPlus,
            Params {
                width: Some(3),
                ..d(5)
            },
        ),
        (
            SchemeKind::Hash,
            Params {
                width: Some(4),
                level: Some(6),
                seed: 5,
                stripes: Some(9),
                ..d(6)
            },
        ),
        (
            SchemeKind::Random,
            Params {
                width: Some(4),
                level: Some(6),
                seed: 4,
                stripes: Some(9),
                ..d(6)
            },
        ),
    ];
    let (mut pairs, mut relocated_twice) = (0, 0);
    for (kind, p) in layouts {
        let n = harness(kind, p.clone(), 1).geo.disks();
        for a in 0..n as u32 {
            for b in (0..n as u32).filter(|&b| b != a) {
                let mut h = harness(kind, p.clone(), 3);
                h.run(&sequence(&h.geo, 7, 12));
                h.fail(a);
                if h.state.generations()[h.state.target_generation() as usize]
                    .blocked
                    .is_some()
                {
                    continue;
                }
                h.rebuild(RebuildOrder::Sequential);
                let out = h.state.fail(&h.geo, b).unwrap();
                h.mem.remove(b);
                if out.data_lost {
                    continue;
                }
                h.run(&sequence(&h.geo, 8, 6));
                h.check_all_reads();
                if out.blocked.is_none() {
                    // A code that relocates two failures: `b` into the spare room too.
                    h.rebuild(RebuildOrder::Sequential);
                    h.check_all_reads();
                    h.run(&sequence(&h.geo, 9, 6));
                    relocated_twice += 1;
                }
                // (A rebuild that needs a replacement makes one: the harness's rule.)
                if h.state.failed().contains(&a) {
                    h.replace(a);
                }
                h.rebuild(RebuildOrder::Parallel { max_in_flight: 2 });
                h.check_all_reads();
                if h.state.failed().contains(&b) {
                    h.replace(b);
                }
                h.rebuild(RebuildOrder::Sequential);
                h.check_all_reads();
                h.check_consistent();
                pairs += 1;
            }
        }
    }
    assert!(pairs > 20, "only {pairs} pairs ran");
    assert!(
        relocated_twice > 20,
        "only {relocated_twice} pairs relocated twice"
    );
}

/// A second member failing during a RAID6 rebuild onto a replacement: the rebuild goes on
/// degraded and rebuilds the replacement from the members left. For every small RAID6 (4 to 7
/// members), every rebuild target `a`, every second failure `b` and every point of the
/// rebuild at which `b` fails (before the first cycle, after one, halfway, after the last):
/// the rebuild finishes without a replacement for `b` (once it ended, `b` failing asks for its
/// replacement), never touches `b`, writes the
/// replacement's units byte for byte as a pool that never lost `b` holds them, and every read
/// is right; then `b`'s replacement is rebuilt and the pool is whole again.
#[test]
fn a_second_failure_during_a_raid6_rebuild_continues_degraded_for_every_pair() {
    let mut cases = 0;
    for disks in 4..=7 {
        for a in 0..disks as u32 {
            for b in (0..disks as u32).filter(|&b| b != a) {
                let cycles = 4;
                for fail_after in [0, 1, cycles / 2, cycles] {
                    let mut h = harness(SchemeKind::Raid6, d(disks), cycles);
                    let seed = (disks * 1000) as u64 + (a * 100 + b * 10) as u64 + fail_after;
                    h.run(&sequence(&h.geo, seed, 12));
                    h.fail(a);
                    h.replace(a);
                    let mut sched =
                        RebuildScheduler::new(RebuildOrder::Sequential, SpeedLimits::default());
                    for _ in 0..fail_after {
                        let plans = sched.next_plans(&h.geo, &h.state).unwrap();
                        assert_eq!(plans.len(), 1);
                        h.mem.run(&plans[0], &mut []).unwrap();
                        sched.complete(&mut h.state, &plans[0]);
                    }
                    h.fail(b);
                    // Foreground writes while degraded, before the rest of the rebuild.
                    h.run(&sequence(&h.geo, seed + 1, 6));
                    assert_eq!(h.state.awaiting_replacement(), vec![b]);
                    let mut rounds = 0;
                    loop {
                        rounds += 1;
                        assert!(rounds < 100, "rebuild stalled");
                        let plans = match sched.next_plans(&h.geo, &h.state) {
                            // `b` failed after the rebuild ended: nothing left to rebuild
                            // but `b`'s units, which need its replacement.
                            Err(raidcore::CoreError::NeedsReplacement { member })
                                if fail_after == cycles =>
                            {
                                assert_eq!(member, b);
                                break;
                            }
                            r => r.unwrap_or_else(|e| {
                                panic!("raid6-{disks} a {a} b {b} after {fail_after}: {e}")
                            }),
                        };
                        if plans.is_empty() {
                            assert!(fail_after < cycles);
                            break;
                        }
                        for p in &plans {
                            p.assert_avoids(h.state.failed());
                            assert!(p.writes.iter().all(|w| w.member == a));
                            h.mem.run(p, &mut []).unwrap();
                            sched.complete(&mut h.state, p);
                        }
                    }
                    assert_eq!(h.state.all_clean(), fail_after < cycles);
                    assert_eq!(h.state.failed(), &[b]);
                    // The replacement holds what a pool that never lost `b` holds.
                    let cb = h.geo.chunk_bytes() as usize;
                    for c in 0..cycles {
                        for st in &h.geo.healthy().stripes {
                            for u in st.units.iter().filter(|u| u.disk == a) {
                                let off = h.geo.member_offset(c, u.loc(), 0) as usize;
                                let got =
                                    &h.mem.members[a as usize].as_ref().unwrap()[off..off + cb];
                                let want =
                                    &h.shadow.members[a as usize].as_ref().unwrap()[off..off + cb];
                                assert!(
                                    got == want,
                                    "raid6-{disks} a {a} b {b} after {fail_after}: cycle {c} \
                                     unit {u:?} of the replacement is wrong"
                                );
                            }
                        }
                    }
                    h.check_all_reads();
                    h.check_consistent();
                    // Tolerance: one more failure (any but `a`'s, which was rebuilt) is
                    // survived, and reads are right without `a`'s neighbours' help.
                    assert_eq!(h.state.fault_tolerance(&h.geo), 1);
                    // `b` replaced: the pool is whole again.
                    h.rebuild(RebuildOrder::Sequential);
                    assert!(h.state.failed().is_empty());
                    h.check_all_reads();
                    h.compare_with_shadow();
                    cases += 1;
                }
            }
        }
    }
    assert_eq!(cases, (12 + 20 + 30 + 42) * 4);
}

/// With nothing to write but units of failed members, the rebuild asks for a replacement
/// (in-place layouts): the first failed member the cycle places units on.
#[test]
fn a_rebuild_with_only_failed_members_to_write_asks_for_a_replacement() {
    let mut h = harness(SchemeKind::Raid6, d(5), 3);
    h.run(&sequence(&h.geo, 41, 10));
    h.fail(3);
    h.fail(1);
    assert_eq!(
        plan_rebuild_cycle(&h.geo, &h.state, 0).unwrap_err(),
        raidcore::CoreError::NeedsReplacement { member: 1 }
    );
    h.replace(3);
    // Member 3's units are rebuilt; member 1's wait.
    let plan = plan_rebuild_cycle(&h.geo, &h.state, 0).unwrap().unwrap();
    assert!(plan.writes.iter().all(|w| w.member == 3) && !plan.writes.is_empty());
    assert_eq!(h.state.awaiting_replacement(), vec![1]);
}

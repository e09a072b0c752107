//! `Plan::windows` cuts a rebuild plan into pieces that hold a bounded window of buffers, and
//! the pieces, run one after the other, do exactly what the whole plan does.
//!
//! Every rebuild plan of every scheme below (after each single failure, and each pair where
//! the scheme survives two; replaced members and spare space alike), cut with windows from one
//! chunk to unbounded: the members after the pieces equal the members after the whole plan,
//! every read, op and write lands in exactly one piece, and a piece is over the window only
//! when it is one group of buffers that cannot be cut. Wide cycles are cut at all (a test of
//! a cutter that never cuts would pass the rest). A plan that reads member bytes it also
//! writes comes back whole.

mod common;

use common::{failure_sets, geometry, scheme, Harness, Rng};
use layout::{Params, SchemeKind};
use raidcore::{
    CoreError, MemberIo, Plan, PlanKind, RebuildOrder, RebuildScheduler, Slice, SpeedLimits,
    WritePolicy,
};

const CHUNK: u64 = 512;

/// Runs `pieces` in order on a copy of `h`'s members.
fn run_pieces(h: &Harness, pieces: &[Plan]) -> Vec<Option<Vec<u8>>> {
    let mut m = h.mem.clone();
    for p in pieces {
        m.run(p, &mut []).unwrap();
    }
    m.members
}

/// Checks every way of cutting `p` against running it whole; returns how many pieces the
/// narrowest window made.
fn check_plan(h: &Harness, p: &Plan) -> usize {
    let mut whole = h.mem.clone();
    whole.run(p, &mut []).unwrap();
    let total: usize = p.buffers.iter().sum();
    let mut narrowest = 1;
    for max in [CHUNK as usize, 3 * CHUNK as usize, total / 2, usize::MAX] {
        let pieces = p.windows(max);
        assert!(!pieces.is_empty());
        if max == CHUNK as usize {
            narrowest = pieces.len();
        }
        assert_eq!(
            run_pieces(h, &pieces),
            whole.members,
            "cycle {}: {} pieces of at most {max} bytes differ from the whole plan",
            p.cycle,
            pieces.len()
        );
        let sum = |f: &dyn Fn(&Plan) -> usize| pieces.iter().map(f).sum::<usize>();
        assert_eq!(sum(&|q| q.reads.len()), p.reads.len());
        assert_eq!(sum(&|q| q.ops.len()), p.ops.len());
        assert_eq!(sum(&|q| q.writes.len()), p.writes.len());
        for q in &pieces {
            assert_eq!((q.kind, q.cycle, &q.locks), (p.kind, p.cycle, &p.locks));
            assert_eq!(q.buffers[0], 0);
            let bytes: usize = q.buffers.iter().sum();
            assert!(
                bytes <= max || q.windows(bytes - 1).len() == 1,
                "a piece of {bytes} bytes over the window {max} could be cut"
            );
            q.validate();
        }
    }
    narrowest
}

/// Rebuilds `h` through the scheduler (replacing members as the layout needs), checking every
/// plan with [`check_plan`] before running it whole; returns the most pieces one plan made.
fn rebuild_checking(h: &mut Harness) -> usize {
    let mut sched = RebuildScheduler::new(RebuildOrder::Sequential, SpeedLimits::default());
    let mut most = 0;
    for _ in 0..10_000 {
        match sched.next_plans(&h.geo, &h.state) {
            Ok(plans) if plans.is_empty() => match h.state.awaiting_replacement().first() {
                Some(&d) => h.replace(d),
                None => return most,
            },
            Ok(plans) => {
                for p in &plans {
                    most = most.max(check_plan(h, p));
                    h.mem.run(p, &mut []).unwrap();
                    sched.complete(&mut h.state, p);
                }
            }
            Err(CoreError::NeedsReplacement { member }) => h.replace(member),
            Err(e) => panic!("rebuild: {e}"),
        }
    }
    panic!("the rebuild does not finish");
}

#[test]
fn rebuild_plans_cut_into_windows_do_what_they_do_whole() {
    let d = |n| Params {
        disks: Some(n),
        ..Params::default()
    };
    let schemes = [
        (SchemeKind::Raid5, d(5)),
        (SchemeKind::Raid5, Params { spares: 1, ..d(6) }),
        (SchemeKind::Raid6, d(6)),
        (SchemeKind::Raid10, d(4)),
        (
            SchemeKind::RaidPlus,
            Params {
                width: Some(3),
                ..d(5)
            },
        ),
        (
            SchemeKind::RaidPlus,
            Params {
                width: Some(4),
                level: Some(6),
                ..d(7)
            },
        ),
        (
            SchemeKind::S2Raid5,
            Params {
                group: Some(3),
                partitions: Some(3),
                ..d(9)
            },
        ),
        (
            SchemeKind::Random,
            Params {
                width: Some(4),
                seed: 3,
                stripes: Some(12),
                ..d(7)
            },
        ),
    ];
    let mut cut_wide = false;
    for (kind, p) in schemes {
        let s = scheme(kind, p);
        let mut base = Harness::new(geometry(s.clone(), CHUNK, 2), WritePolicy::Rmw);
        let cap = base.geo.capacity_bytes();
        base.write(0, &Rng(kind as u64 + 7).bytes(cap as usize));
        for failed in failure_sets(&*s, true) {
            let mut h = base.clone();
            for &m in &failed {
                h.fail(m);
            }
            let most = rebuild_checking(&mut h);
            cut_wide |= most > 2;
            h.check_all_reads();
        }
    }
    assert!(
        cut_wide,
        "no rebuild plan was cut into more than two pieces"
    );
}

/// A plan that reads member bytes it also writes is not cut: a piece run after another would
/// read what that one wrote. Without the overlap, the same plan is cut.
#[test]
fn a_plan_that_reads_what_it_writes_stays_whole() {
    let io = |member, offset_bytes, buf| MemberIo {
        member,
        offset_bytes,
        data: Slice::whole(buf, 512),
    };
    let plan = |write_to| Plan {
        kind: PlanKind::Rebuild { from: 0, to: 1 },
        cycle: 0,
        layout_generation: 0,
        state_generation: 0,
        user_offset: 0,
        buffers: vec![0, 512, 512],
        reads: vec![io(0, 0, 1), io(1, 0, 2)],
        ops: vec![],
        writes: vec![io(write_to, 0, 1), io(2, 0, 2)],
        locks: vec![],
        modes: vec![],
        bpgl_removals: None,
    };
    assert_eq!(
        plan(1).windows(512).len(),
        1,
        "the write to member 1 overlaps its read"
    );
    assert_eq!(plan(3).windows(512).len(), 2);
}

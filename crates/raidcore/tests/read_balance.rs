//! Reads of units with copies spread over the copies (`plan_read_balanced`, the way Linux
//! MD's `read_balance` does): a random reader loads every copy alike, a sequential reader
//! stays on one copy, and a failed copy is never read. Correctness of the balanced plans
//! under every failure and rebuild is checked by the scheme matrix (`common::Harness` plans
//! every other read balanced).

mod common;

use std::collections::VecDeque;

use common::{geometry, scheme, Rng};
use layout::{Params, SchemeKind};
use raidcore::{plan_read, plan_read_balanced, ArrayState, Geometry, MemberLoad};

fn d(n: usize) -> Params {
    Params {
        disks: Some(n),
        ..Params::default()
    }
}

/// Member reads of `n` random 4 KiB reads by a reader that keeps `depth` requests in flight;
/// each member completes one queued I/O per tick (an executor with equal disks). `balanced`
/// plans with the members' loads, otherwise with `plan_read`.
fn random_reads(
    geo: &Geometry,
    state: &ArrayState,
    n: usize,
    depth: usize,
    balanced: bool,
) -> Vec<u64> {
    let disks = geo.disks();
    let mut loads = vec![MemberLoad::default(); disks];
    let mut queues: Vec<VecDeque<u64>> = vec![VecDeque::new(); disks];
    let mut reads = vec![0u64; disks];
    let mut rng = Rng(7);
    let blocks = geo.capacity_bytes() / 4096;
    let mut issued = 0;
    let mut in_flight = 0;
    while issued < n {
        while in_flight < depth && issued < n {
            let off = rng.below(blocks) * 4096;
            let plans = if balanced {
                plan_read_balanced(geo, state, off, 4096, &loads).unwrap()
            } else {
                plan_read(geo, state, off, 4096).unwrap()
            };
            for p in &plans {
                p.assert_avoids(state.failed());
                for io in &p.reads {
                    let m = io.member as usize;
                    reads[m] += 1;
                    queues[m].push_back(io.offset_bytes + io.data.len as u64);
                    loads[m].queued += 1;
                }
            }
            issued += 1;
            in_flight += 1;
        }
        for m in 0..disks {
            if let Some(end) = queues[m].pop_front() {
                loads[m].queued -= 1;
                loads[m].head = end;
                in_flight -= 1;
            }
        }
    }
    reads
}

fn within(reads: &[u64], share: f64) -> bool {
    let mean = reads.iter().sum::<u64>() as f64 / reads.len() as f64;
    reads
        .iter()
        .all(|&r| (r as f64 - mean).abs() <= share * mean)
}

#[test]
fn random_reads_load_every_copy_alike() {
    // Whether the first copies alone leave some members idle: MD's near RAID10 over an odd
    // number of members rotates the copies, so first copies already fall on every member.
    for (name, kind, p, first_copies_skewed) in [
        ("raid1 of 2", SchemeKind::Raid1, d(2), true),
        ("raid1 of 3", SchemeKind::Raid1, d(3), true),
        ("raid10 of 4", SchemeKind::Raid10, d(4), true),
        ("raid10 of 5", SchemeKind::Raid10, d(5), false),
    ] {
        let geo = geometry(scheme(kind, p), 64 << 10, 64);
        let state = ArrayState::new(&geo);
        let balanced = random_reads(&geo, &state, 20_000, 8, true);
        assert!(
            within(&balanced, 0.10),
            "{name}: balanced reads per member {balanced:?}"
        );
        // The first-copy planner leaves the copies idle (what balancing is for).
        let first = random_reads(&geo, &state, 20_000, 8, false);
        assert_eq!(
            !within(&first, 0.10),
            first_copies_skewed,
            "{name}: first-copy reads per member {first:?}"
        );
        assert_eq!(balanced.iter().sum::<u64>(), first.iter().sum::<u64>());
    }
}

#[test]
fn a_sequential_reader_stays_on_one_copy() {
    let geo = geometry(scheme(SchemeKind::Raid1, d(2)), 64 << 10, 16);
    let state = ArrayState::new(&geo);
    for start_on in 0..2usize {
        // The reader's copy is busier than the other, yet the stream stays where its last
        // read ended (MD keeps a sequential reader on its disk).
        let mut loads = vec![MemberLoad::default(); 2];
        loads[start_on] = MemberLoad { queued: 3, head: 0 };
        loads[1 - start_on].head = 1 << 20;
        for i in 0..64u64 {
            let plans = plan_read_balanced(&geo, &state, i * 4096, 4096, &loads).unwrap();
            let io = &plans[0].reads[0];
            assert_eq!(
                io.member as usize, start_on,
                "read {i} left the sequential copy"
            );
            loads[start_on].head = io.offset_bytes + io.data.len as u64;
        }
    }
}

#[test]
fn a_failed_copy_is_never_read_and_the_survivor_takes_every_read() {
    for (kind, p, disks) in [
        (SchemeKind::Raid1, d(2), 2usize),
        (SchemeKind::Raid10, d(4), 4),
    ] {
        let geo = geometry(scheme(kind, p), 64 << 10, 16);
        for failed in 0..disks {
            let mut state = ArrayState::new(&geo);
            state.fail(&geo, failed as u32).unwrap();
            let reads = random_reads(&geo, &state, 2_000, 8, true);
            assert_eq!(
                reads[failed], 0,
                "{kind:?}: failed member {failed} was read"
            );
        }
    }
}

/// Without copies there is nothing to choose: hints of any kind leave the plans as
/// `plan_read` makes them, healthy and degraded (RAID5 and RAID6).
#[test]
fn layouts_without_copies_ignore_the_hints() {
    for (kind, n) in [(SchemeKind::Raid5, 5), (SchemeKind::Raid6, 6)] {
        let geo = geometry(scheme(kind, d(n)), 64 << 10, 16);
        let mut healthy = ArrayState::new(&geo);
        let mut degraded = healthy.clone();
        degraded.fail(&geo, 1).unwrap();
        for state in [&mut healthy, &mut degraded] {
            let mut rng = Rng(11);
            for _ in 0..200 {
                let loads: Vec<MemberLoad> = (0..n)
                    .map(|_| MemberLoad {
                        queued: rng.below(8) as u32,
                        head: rng.below(1 << 20),
                    })
                    .collect();
                let off = rng.below(geo.capacity_bytes() - 1);
                let len = 1 + rng.below((geo.capacity_bytes() - off).min(1 << 20));
                assert_eq!(
                    plan_read_balanced(&geo, state, off, len, &loads).unwrap(),
                    plan_read(&geo, state, off, len).unwrap(),
                    "{kind:?} read {off}+{len}"
                );
            }
        }
    }
}

#[test]
fn empty_loads_plan_what_plan_read_plans() {
    let geo = geometry(scheme(SchemeKind::Raid10, d(4)), 64 << 10, 16);
    let state = ArrayState::new(&geo);
    let mut rng = Rng(3);
    for _ in 0..200 {
        let off = rng.below(geo.capacity_bytes() - 1);
        let len = 1 + rng.below((geo.capacity_bytes() - off).min(1 << 20));
        assert_eq!(
            plan_read_balanced(&geo, &state, off, len, &[]).unwrap(),
            plan_read(&geo, &state, off, len).unwrap()
        );
    }
}

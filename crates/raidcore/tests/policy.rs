//! Write policies: which mode each picks (MD's rule, seed 004's modthresh, always-RMW, cost)
//! and that every policy leaves the same bytes on the members.

mod common;

use common::{geometry, scheme, sequence, Harness};
use layout::{Params, SchemeKind};
use raidcore::{plan_read, plan_write, Op, Plan, WriteMode, WritePolicy};

fn raid(kind: SchemeKind, disks: usize) -> Harness {
    let p = Params {
        disks: Some(disks),
        ..Params::default()
    };
    Harness::new(geometry(scheme(kind, p), 512, 2), WritePolicy::Md)
}

/// The single plan of a write of `chunks` whole chunks at logical chunk 0 (stripe 0: MD's
/// left-symmetric layout puts chunks 0..k-1 in stripe 0).
fn write_plan(h: &Harness, chunks: u64, policy: &WritePolicy) -> Plan {
    let mut plans = plan_write(&h.geo, &h.state, 0, chunks * 512, policy).unwrap();
    assert_eq!(plans.len(), 1);
    plans.remove(0)
}

fn mode(p: &Plan) -> WriteMode {
    assert_eq!(p.modes.len(), 1, "one stripe written: {:?}", p.modes);
    assert_eq!(p.modes[0].0, 0);
    p.modes[0].1
}

#[test]
fn md_picks_rmw_for_one_chunk_and_rcw_for_four_of_five() {
    let h = raid(SchemeKind::Raid5, 6);
    let one = write_plan(&h, 1, &WritePolicy::Md);
    assert_eq!(mode(&one), WriteMode::Rmw);
    // RMW reads the old data and the old parity, writes both.
    assert_eq!((one.reads.len(), one.writes.len()), (2, 2));
    assert!(one.ops.iter().any(|o| matches!(o, Op::XorUpdate { .. })));
    let four = write_plan(&h, 4, &WritePolicy::Md);
    assert_eq!(mode(&four), WriteMode::Rcw);
    // RCW reads the one data unit not written, writes four data units and the parity.
    assert_eq!((four.reads.len(), four.writes.len()), (1, 5));
    assert!(four.ops.iter().any(|o| matches!(o, Op::XorEncode { .. })));
    // A full-stripe write reads nothing.
    let five = write_plan(&h, 5, &WritePolicy::Md);
    assert_eq!((mode(&five), five.reads.len()), (WriteMode::Rcw, 0));
}

#[test]
fn modthresh_keeps_medium_writes_as_rmw() {
    // Seed 004, section 4.3 example: 4 data drives + parity, a 2-drive write: rmw = 3, rcw = 2.
    let h = raid(SchemeKind::Raid5, 5);
    assert_eq!(mode(&write_plan(&h, 2, &WritePolicy::Md)), WriteMode::Rcw);
    let mt = write_plan(&h, 2, &WritePolicy::Modthresh);
    assert_eq!(mode(&mt), WriteMode::Rmw);
    assert_eq!(mt.reads.len(), 3);
    // Past half the data drives both choose RCW; one drive, both RMW.
    for (chunks, want) in [
        (1, WriteMode::Rmw),
        (3, WriteMode::Rcw),
        (4, WriteMode::Rcw),
    ] {
        assert_eq!(mode(&write_plan(&h, chunks, &WritePolicy::Md)), want);
        assert_eq!(mode(&write_plan(&h, chunks, &WritePolicy::Modthresh)), want);
    }
    // 5 data units, 2 written: MD's tie (3 = 3) goes to RCW, modthresh keeps RMW.
    let h6 = raid(SchemeKind::Raid5, 6);
    assert_eq!(mode(&write_plan(&h6, 2, &WritePolicy::Md)), WriteMode::Rcw);
    assert_eq!(
        mode(&write_plan(&h6, 2, &WritePolicy::Modthresh)),
        WriteMode::Rmw
    );
    assert_eq!(
        mode(&write_plan(&h6, 3, &WritePolicy::Modthresh)),
        WriteMode::Rcw
    );
    // RAID6, 4 data units, 2 written: MD RCW (rmw 4 > rcw 2); modthresh with two parities RMW.
    let h6q = raid(SchemeKind::Raid6, 6);
    assert_eq!(mode(&write_plan(&h6q, 2, &WritePolicy::Md)), WriteMode::Rcw);
    let q = write_plan(&h6q, 2, &WritePolicy::Modthresh);
    assert_eq!(mode(&q), WriteMode::Rmw);
    assert!(q.ops.iter().any(|o| matches!(o, Op::PqUpdate { .. })));
}

#[test]
fn rmw_and_cost_policies() {
    let h = raid(SchemeKind::Raid5, 6);
    assert_eq!(mode(&write_plan(&h, 4, &WritePolicy::Rmw)), WriteMode::Rmw);
    // Stripe 0 of 6-disk left-symmetric RAID5: parity on disk 5, chunk 0 on disk 0.
    let slow_parity = WritePolicy::Cost {
        read_cost: vec![1.0, 1.0, 1.0, 1.0, 1.0, 50.0],
    };
    assert_eq!(mode(&write_plan(&h, 1, &slow_parity)), WriteMode::Rcw);
    let uniform = WritePolicy::Cost {
        read_cost: vec![1.0; 6],
    };
    // Uniform costs: one read per member either way, a tie: RCW.
    assert_eq!(mode(&write_plan(&h, 1, &uniform)), WriteMode::Rcw);
    let slow_data = WritePolicy::Cost {
        read_cost: vec![1.0, 1.0, 9.0, 1.0, 1.0, 1.0],
    };
    assert_eq!(mode(&write_plan(&h, 1, &slow_data)), WriteMode::Rmw);
}

#[test]
fn degraded_write_to_a_lost_unit_uses_rcw() {
    let mut h = raid(SchemeKind::Raid5, 6);
    h.fail(0); // holds chunk 0 of stripe 0
    let p = plan_write(&h.geo, &h.state, 100, 50, &WritePolicy::Rmw).unwrap();
    assert_eq!(mode(&p[0]), WriteMode::Rcw);
    // The lost unit is not written; its new value lives in the parity.
    assert!(p[0].writes.iter().all(|w| w.member != 0));
    assert_eq!(p[0].writes.len(), 1);
    h.write(100, &[7; 50]);
    h.check_all_reads();
}

#[test]
fn degraded_reads_read_each_survivor_once() {
    let mut h = raid(SchemeKind::Raid5, 5);
    h.fail(1); // chunk 1 of stripe 0
    let plans = plan_read(&h.geo, &h.state, 0, 4 * 512).unwrap();
    let p = &plans[0];
    // Three surviving data units straight into the user buffer, plus P; the lost unit is
    // rebuilt straight into the user buffer: no second read, no copy.
    assert_eq!(p.reads.len(), 4);
    assert_eq!(p.ops.len(), 1);
    assert!(matches!(p.ops[0], Op::XorRecover { .. }));
    // RAID6: reading one lost chunk reads exactly k = 4 survivors, Q computed into scratch.
    let mut q = raid(SchemeKind::Raid6, 6);
    q.fail(1); // chunk 0 of stripe 0: P on disk 5, Q on disk 0, data on disks 1..=4
    let plans = plan_read(&q.geo, &q.state, 0, 512).unwrap();
    let p = &plans[0];
    assert_eq!(p.reads.len(), 4);
    match &p.ops[0] {
        Op::PqRecover { erased, .. } => assert_eq!(erased, &vec![0, 5]),
        o => panic!("expected a P+Q recovery, got {o:?}"),
    }
    q.write(0, &[1; 700]);
    q.check_all_reads();
}

#[test]
fn every_policy_leaves_the_same_bytes() {
    let cases: Vec<(SchemeKind, Params)> = vec![
        (
            SchemeKind::Raid5,
            Params {
                disks: Some(6),
                ..Params::default()
            },
        ),
        (
            SchemeKind::Raid6,
            Params {
                disks: Some(7),
                ..Params::default()
            },
        ),
        (
            SchemeKind::Rm2,
            Params {
                disks: Some(8),
                ..Params::default()
            },
        ),
        (
            SchemeKind::RaidPlus,
            Params {
                disks: Some(7),
                width: Some(4),
                level: Some(6),
                ..Params::default()
            },
        ),
    ];
    for (kind, p) in cases {
        let geo = geometry(scheme(kind, p), 512, 2);
        let disks = geo.disks();
        let policies = [
            WritePolicy::Md,
            WritePolicy::Modthresh,
            WritePolicy::Rmw,
            WritePolicy::Cost {
                read_cost: (0..disks).map(|d| 1.0 + d as f64).collect(),
            },
        ];
        let healthy = sequence(&geo, 99, 25);
        let degraded = sequence(&geo, 98, 15);
        let mut results = Vec::new();
        for pol in policies {
            let mut h = Harness::new(geo.clone(), pol);
            h.run(&healthy);
            h.fail(1);
            h.run(&degraded);
            h.check_all_reads();
            h.check_consistent();
            results.push(h.mem.members.clone());
        }
        for r in &results[1..] {
            assert!(
                *r == results[0],
                "{kind:?}: policies disagree on member bytes"
            );
        }
    }
}

//! Mirror read balancing in the simulator (`SimConfig::read_balance`, the planner's
//! `plan_read_balanced` fed with each disk's queue and head): a read-only random 4 KiB load on
//! RAID1 of 2 and near RAID10 of 4 reads every copy alike and gets nearly twice the
//! throughput of first-copy reads; a sequential reader stays on one copy.

use layout::{Params, SchemeKind};
use sim::{simulate, Drive, Report, SimConfig, SourceOptions, WorkloadSpec};

fn run(kind: SchemeKind, disks: usize, workload: &str, balance: bool) -> Report {
    let scheme = layout::build(
        kind,
        &Params {
            disks: Some(disks),
            ..Params::default()
        },
    )
    .unwrap();
    let mut cfg = SimConfig::new(Drive::SeagateSt3500320as.params());
    cfg.read_balance = balance;
    let spec = WorkloadSpec::parse(workload, 1, None).unwrap();
    simulate(
        scheme,
        512 << 10,
        4 << 30,
        cfg,
        &spec,
        &SourceOptions::default(),
    )
    .unwrap()
}

#[test]
fn random_reads_use_every_copy_and_nearly_double_the_throughput() {
    let w = "random:read=1:size=4K:qd=16:requests=4000";
    for (kind, disks) in [(SchemeKind::Raid1, 2), (SchemeKind::Raid10, 4)] {
        let first = run(kind, disks, w, false);
        let bal = run(kind, disks, w, true);
        let reads: Vec<u64> = bal.per_disk.iter().map(|d| d.reads).collect();
        let mean = reads.iter().sum::<u64>() as f64 / reads.len() as f64;
        assert!(
            reads
                .iter()
                .all(|&r| (r as f64 - mean).abs() <= 0.10 * mean),
            "{kind:?}: reads per member {reads:?}"
        );
        // First copies only: the mirrors idle.
        assert!(
            first.per_disk.iter().any(|d| d.reads == 0),
            "{kind:?}: first-copy reads per member {:?}",
            first.per_disk.iter().map(|d| d.reads).collect::<Vec<_>>()
        );
        let ratio = bal.throughput_iops / first.throughput_iops;
        assert!(
            ratio >= 1.7,
            "{kind:?}: balanced {} IOPS vs first copy {} IOPS ({ratio:.2}x)",
            bal.throughput_iops,
            first.throughput_iops
        );
    }
}

#[test]
fn a_sequential_reader_stays_on_one_copy() {
    let bal = run(
        SchemeKind::Raid1,
        2,
        "seq:read=1:size=64K:qd=1:requests=2000",
        true,
    );
    let reads: Vec<u64> = bal.per_disk.iter().map(|d| d.reads).collect();
    assert!(
        reads.contains(&0),
        "a sequential stream was split: {reads:?}"
    );
}

//! One seed gives one run: the executor's event order, the workload and the drives depend on
//! nothing else.

use layout::{Params, SchemeKind};
use raidcore::{RebuildOrder, SpeedLimits};
use sim::{
    simulate, CheckMode, Drive, Failure, Phase, Report, Scheduler, SimConfig, SourceOptions,
    WorkloadSpec,
};

const SEC: u64 = 1_000_000_000;

fn run(seed: u64) -> Report {
    let scheme = layout::build(
        SchemeKind::Raid5,
        &Params {
            disks: Some(5),
            ..Params::default()
        },
    )
    .unwrap();
    let mut cfg = SimConfig::new(Drive::SeagateSt3500320as.params());
    cfg.seed = seed;
    cfg.scheduler = Scheduler::ELEVATOR;
    cfg.failure = Some(Failure {
        member: 1,
        at_ns: 2 * SEC,
    });
    cfg.rebuild_delay_ns = Some(SEC);
    cfg.rebuild_order = RebuildOrder::Parallel { max_in_flight: 2 };
    cfg.speed = SpeedLimits {
        min_bytes_per_sec: 4 << 20,
        max_bytes_per_sec: 0,
    };
    let spec = WorkloadSpec::parse(
        "random:read=0.6:size=4K@3,64K@1:iops=150:requests=1500",
        seed,
        None,
    )
    .unwrap();
    simulate(
        scheme,
        64 << 10,
        8 << 20,
        cfg,
        &spec,
        &SourceOptions::default(),
    )
    .unwrap()
}

#[test]
fn same_seed_same_report_other_seed_other_report() {
    let a = run(7);
    let b = run(7);
    assert_eq!(a, b, "two runs with seed 7 differ");
    let c = run(8);
    assert_ne!(
        a.phases, c.phases,
        "seeds 7 and 8 gave identical response times"
    );

    // The run covers every phase and finishes its rebuild.
    assert_eq!(a.requests, 1500);
    assert_eq!(a.requests_failed, 0);
    for p in [Phase::Normal, Phase::Degraded, Phase::Rebuilding] {
        assert!(a.phase(p).count > 0, "no request in phase {p:?}");
    }
    let rb = a.rebuild.as_ref().unwrap();
    assert_eq!(rb.start_s, Some(3.0));
    assert!(rb.time_s.unwrap() > 0.0);
    assert_eq!(rb.replaced, Some(1));
    assert_eq!(rb.bytes_written, a.member_bytes);
    // Debug builds run every plan through the in-memory executor on arrays this small.
    let expect = if cfg!(debug_assertions) {
        CheckMode::MemArray
    } else {
        CheckMode::Off
    };
    assert_eq!(a.check, expect);
}

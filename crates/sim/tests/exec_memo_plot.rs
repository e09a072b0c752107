//! The executor's plan memo changes nothing but the planning time, and the report's timeline
//! (behind `raidforge sim --plot`) covers the run, marks the failure and the rebuild, and
//! accounts for every completed request.

use layout::{Params, SchemeKind};
use raidcore::{RebuildOrder, SpeedLimits, WritePolicy};
use sim::{
    simulate, CheckMode, Drive, Failure, Report, Scheduler, SimConfig, SourceOptions, Timeline,
    WorkloadSpec,
};

const SEC: u64 = 1_000_000_000;

/// A small RAID5 (or RAID+) with a failure at 2 s and a rebuild, under a workload whose
/// requests repeat offsets (a 2 MiB span), so the memo serves many of them; small enough
/// for the in-memory checker in debug builds.
fn run(
    kind: SchemeKind,
    disks: usize,
    width: Option<usize>,
    memo: bool,
    policy: WritePolicy,
) -> Report {
    let scheme = layout::build(
        kind,
        &Params {
            disks: Some(disks),
            width,
            ..Params::default()
        },
    )
    .unwrap();
    let mut cfg = SimConfig::new(Drive::SeagateSt3500320as.params());
    cfg.seed = 3;
    cfg.scheduler = Scheduler::ELEVATOR;
    cfg.failure = Some(Failure {
        member: 1,
        at_ns: 2 * SEC,
    });
    cfg.rebuild_delay_ns = Some(SEC / 2);
    cfg.rebuild_order = RebuildOrder::Parallel { max_in_flight: 2 };
    cfg.speed = SpeedLimits {
        min_bytes_per_sec: 2 << 20,
        max_bytes_per_sec: 0,
    };
    cfg.write_policy = policy;
    cfg.plan_memo = memo;
    let spec = WorkloadSpec::parse(
        "random:read=0.5:size=4K@3,16K@1:iops=300:requests=3000:span=2M",
        3,
        None,
    )
    .unwrap();
    simulate(
        scheme,
        16 << 10,
        4 << 20,
        cfg,
        &spec,
        &SourceOptions::default(),
    )
    .unwrap()
}

#[test]
fn the_plan_memo_changes_nothing_but_planning() {
    for (kind, disks, width) in [
        (SchemeKind::Raid5, 5, None),
        (SchemeKind::RaidPlus, 7, Some(3)),
    ] {
        for policy in [WritePolicy::Md, WritePolicy::Rmw] {
            let with = run(kind, disks, width, true, policy.clone());
            let mut without = run(kind, disks, width, false, policy);
            assert!(
                with.plans_memoised > with.plans / 4,
                "{kind:?}: {} of {} plans from the memo",
                with.plans_memoised,
                with.plans
            );
            assert_eq!(without.plans_memoised, 0);
            without.plans_memoised = with.plans_memoised;
            assert_eq!(with, without, "{kind:?}: the memo changed the run");
            if cfg!(debug_assertions) {
                // ... and every memoised plan was compared with the planner's own.
                assert_eq!(with.check, CheckMode::MemArray);
            }
        }
    }
}

#[test]
fn the_timeline_covers_the_run_and_counts_every_request() {
    let r = run(SchemeKind::Raid5, 5, None, true, WritePolicy::Md);
    let t = &r.timeline;
    assert!(!t.is_empty() && t.len() <= Timeline::MAX_BUCKETS);
    assert_eq!(t[0].start_s, 0.0);
    assert!(
        t.last().unwrap().end_s >= r.sim_time_s,
        "buckets end before the run"
    );
    for w in t.windows(2) {
        assert_eq!(w[0].end_s, w[1].start_s, "buckets are contiguous");
    }
    assert_eq!(t.iter().map(|p| p.count).sum::<u64>(), r.requests);
    for p in t.iter().filter(|p| p.count > 0) {
        assert!(p.mean_ms > 0.0 && p.p99_ms >= p.mean_ms / 2.0, "{p:?}");
    }
    // The failure, the rebuild start and its end are marked where the rebuild report says.
    let rb = r.rebuild.as_ref().unwrap();
    let m = r.markers();
    assert_eq!(m[0], (2.0, "member 1 fails".to_string()));
    assert_eq!(m[1], (2.5, "rebuild starts".to_string()));
    assert_eq!(m[2].0, rb.end_s.expect("the rebuild finished"));
    assert!(m[2].0 <= t.last().unwrap().end_s);
    // Requests arrived on both sides of the failure.
    assert!(t.iter().any(|p| p.count > 0 && p.end_s <= 2.0));
    assert!(t.iter().any(|p| p.count > 0 && p.start_s >= 2.0));

    let svg = r.plot_svg("raid5 x5");
    assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
    assert!(svg.contains("member 1 fails") && svg.contains("rebuild done"));
    assert!(svg.contains("p99") && svg.contains("member I/Os per disk"));
    // One bar per member and series (foreground on all five, rebuild I/O on the survivors'
    // reads and the replacement's writes), plus the legend swatches.
    let bars = svg.matches("<rect x=").count();
    assert!(bars >= 5 + 2, "{bars} bars");
    // Both panels title both axes (the per-disk panel's x axis too).
    assert_eq!(svg.matches("class=\"x-title\"").count(), 2);
    assert_eq!(svg.matches("class=\"y-title\"").count(), 2);
    assert!(svg.contains(">member disk</text>"));
    // Requests arrive until after the rebuild here: the curve needs no explanation. Without
    // the requests of the second half of the rebuild, the chart says why the curve stops.
    assert!(r.curve_end_note().is_none());
    assert!(!svg.contains("class=\"note\""));
    let end = rb.end_s.unwrap();
    let mut short = r.clone();
    for p in short
        .timeline
        .iter_mut()
        .filter(|p| p.start_s >= (2.5 + end) / 2.0)
    {
        p.count = 0;
    }
    let note = short
        .curve_end_note()
        .expect("the curve ends before the rebuild");
    assert!(note.contains("rebuild ran on alone"), "{note}");
    // The note is under the legend, wrapped into lines of class "note".
    let svg = short.plot_svg("raid5 x5");
    assert!(svg.matches("class=\"note\"").count() >= 3, "{svg}");
    assert!(svg.contains(">The response-time curve"), "{svg}");
}

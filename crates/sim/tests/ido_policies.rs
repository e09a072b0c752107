//! Seed 003 in the executor: every rebuild policy on a skewed workload (a hot-spot share of
//! random requests), the surrogate set used as raidcore::ido decides, the rebuild finishing,
//! the reclaim emptying the D-Map, and IDO redirecting more requests than WorkOut and VDF.

use layout::{Params, SchemeKind};
use raidcore::ido::RebuildPolicy;
use raidcore::{RebuildOrder, SpeedLimits};
use sim::ido::Hotspot;
use sim::{Drive, Failure, IdoSimConfig, Phase, Report, SimConfig, Simulator, WorkloadSpec};

const SEC: u64 = 1_000_000_000;

/// RAID5 over 4 members of 48 MiB, 64 KiB chunks.
fn raid5_of_4() -> raidcore::Geometry {
    let p = Params {
        disks: Some(4),
        ..Params::default()
    };
    let scheme = layout::build(SchemeKind::Raid5, &p).unwrap();
    raidcore::Geometry::new(scheme, 64 << 10, 48 << 20).unwrap()
}

fn run(policy: Option<RebuildPolicy>, latency_ns: u64) -> Report {
    let geo = raid5_of_4();
    let mut cfg = SimConfig::new(Drive::WdWd1600aajs.params());
    cfg.failure = Some(Failure {
        member: 1,
        at_ns: 20 * SEC,
    });
    cfg.rebuild_order = RebuildOrder::Parallel { max_in_flight: 4 };
    cfg.foreground_idle_ns = 20_000_000;
    cfg.speed = SpeedLimits {
        min_bytes_per_sec: 1 << 20,
        max_bytes_per_sec: 0,
    };
    cfg.ido = policy.map(|p| {
        let mut i = IdoSimConfig::new(p);
        i.zone_bytes = Some(3 << 20);
        i.latency_ns = latency_ns;
        i
    });
    let spec = WorkloadSpec::parse(
        "random:read=0.8:size=4K@60,16K@30,64K@10:iops=60:requests=3000",
        7,
        None,
    )
    .unwrap();
    let inner = spec
        .open(geo.capacity_bytes(), &Default::default())
        .unwrap();
    let mut w = Hotspot::new(inner, geo.capacity_bytes(), 4, 3 << 20, 0.85, 7);
    Simulator::new(geo, cfg).unwrap().run(&mut w).unwrap()
}

#[test]
fn policies_rebuild_redirect_and_reclaim() {
    let base = run(None, 0);
    let t_base = base.rebuild_time_s().unwrap();
    let mut out = Vec::new();
    for p in RebuildPolicy::ALL {
        let r = run(Some(p), 0);
        let i = r.ido.as_ref().expect("an IDO report");
        let t = r.rebuild_time_s().expect("the rebuild finished");
        let resp = r.phase(Phase::Rebuilding).mean_ms;
        eprintln!(
            "{p:>8}: rebuild {t:7.2} s, response during rebuild {resp:7.2} ms, redirected {:5.1} %, hot zones {}, migrated {}, reclaimed {} B, reclaim end {:?}",
            i.redirected_share * 100.0,
            i.hot_zones,
            i.stats.zones_migrated,
            i.stats.reclaimed_bytes,
            i.reclaim_end_s
        );
        assert_eq!(r.requests + r.requests_failed, 3000);
        // Every redirected write was written back.
        assert_eq!(
            i.stats.reclaimed_bytes > 0,
            i.stats.writes_redirected > 0,
            "{p}"
        );
        if i.stats.writes_redirected > 0 {
            assert!(i.reclaim_end_s.is_some(), "{p}: the reclaim did not finish");
        }
        if !p.uses_surrogate() {
            assert_eq!(i.redirected_share, 0.0);
            assert!(i.surrogate_ios.iter().all(|&(r, w)| r + w == 0));
        }
        out.push((p, t, resp, i.redirected_share));
    }
    // PR with the bookkeeping is PR without it.
    assert!((out[0].1 - t_base).abs() < 1e-9, "{} vs {t_base}", out[0].1);
    let get = |p: RebuildPolicy| *out.iter().find(|o| o.0 == p).unwrap();
    let (ido, wo, vdf, pr) = (
        get(RebuildPolicy::Ido),
        get(RebuildPolicy::Workout),
        get(RebuildPolicy::Vdf),
        get(RebuildPolicy::Pr),
    );
    // IDO moves hot zones up front: it redirects more than WorkOut and VDF, and rebuilds
    // faster than PR (less foreground load on the degraded set).
    assert!(ido.3 > wo.3 && ido.3 > vdf.3, "{out:?}");
    assert!(ido.1 < pr.1, "{out:?}");
    assert!(ido.2 < pr.2, "{out:?}");
}

#[test]
fn a_remote_surrogate_costs_response_time_not_rebuild_time() {
    let local = run(Some(RebuildPolicy::Ido), 0);
    let remote = run(Some(RebuildPolicy::Ido), 2_000_000);
    let (tl, tr) = (
        local.rebuild_time_s().unwrap(),
        remote.rebuild_time_s().unwrap(),
    );
    let (rl, rr) = (
        local.phase(Phase::Rebuilding).mean_ms,
        remote.phase(Phase::Rebuilding).mean_ms,
    );
    eprintln!("local {tl:.2} s {rl:.2} ms, remote {tr:.2} s {rr:.2} ms");
    assert!(rr > rl);
    assert!((tr - tl).abs() / tl < 0.25);
}

/// WorkOut under 4 KiB random writes only (no read to fill from), on `drive`: every write
/// during the rebuild goes to the surrogate's log.
fn writes_during_a_rebuild(drive: sim::disk::DriveParams, header: Option<u64>) -> Report {
    let geo = raid5_of_4();
    let mut cfg = SimConfig::new(drive);
    cfg.failure = Some(Failure {
        member: 1,
        at_ns: 2 * SEC,
    });
    cfg.ido = Some({
        let mut i = IdoSimConfig::new(RebuildPolicy::Workout);
        i.zone_bytes = Some(3 << 20);
        i.log_header_bytes = header;
        i
    });
    let spec =
        WorkloadSpec::parse("random:read=0:size=4K:iops=100:requests=1500", 3, None).unwrap();
    let mut w = spec
        .open(geo.capacity_bytes(), &Default::default())
        .unwrap();
    Simulator::new(geo, cfg).unwrap().run(&mut w).unwrap()
}

/// The engine has no NVRAM for the D-Map: each redirected write carries its mapping in a
/// 4 KiB header in front of it, in the same surrogate request (`dev::ido`). On the engine's
/// emulated member the simulator's surrogate log holds the same; on the seeds' drive models it
/// holds the data alone, as the seed's does.
#[test]
fn redirected_writes_carry_the_engines_log_header_on_emulated_members() {
    let used_per_write = |r: &Report| {
        let i = r.ido.as_ref().expect("an IDO report");
        assert!(i.stats.writes_redirected > 50, "{:?}", i.stats);
        assert_eq!(i.surrogate_used_bytes % i.stats.writes_redirected, 0);
        i.surrogate_used_bytes / i.stats.writes_redirected
    };
    let emulated = || sim::disk::DriveParams::by_name("hdd:150MB/s:4ms").unwrap();
    assert_eq!(
        used_per_write(&writes_during_a_rebuild(emulated(), None)),
        4096 + raidcore::ido::LOG_HEADER_BYTES
    );
    assert_eq!(
        used_per_write(&writes_during_a_rebuild(emulated(), Some(0))),
        4096
    );
    assert_eq!(
        used_per_write(&writes_during_a_rebuild(Drive::WdWd1600aajs.params(), None)),
        4096
    );
}

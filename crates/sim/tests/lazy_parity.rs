//! Lazy parity in the simulator: small random writes at queue depth 16 run faster than eager
//! (fewer member I/Os per write; the deferred parity is processed when the run goes idle), the
//! list is empty at the end, and a failure makes the executor flush first. Deterministic (one
//! seed), qualitative bounds only.

use std::sync::Arc;

use layout::{Params, Scheme, SchemeKind};
use raidcore::ParityPolicy;
use sim::lpu::small_write_speedup;
use sim::{CheckMode, Drive, Failure, LazyModel, Scheduler, SimConfig};

fn scheme(kind: SchemeKind, disks: usize) -> Arc<dyn Scheme> {
    layout::build(
        kind,
        &Params {
            disks: Some(disks),
            ..Params::default()
        },
    )
    .unwrap()
}

/// A lazy-parity run of `spec` (seed `seed`) over `kind` on 6 members of 4 MiB, 4 KiB chunks;
/// `cfg` is the drive's configuration with the test's settings.
fn run_lazy(kind: SchemeKind, mut cfg: SimConfig, spec: &str, seed: u64) -> sim::Report {
    cfg.parity = ParityPolicy::Lazy;
    let spec = sim::WorkloadSpec::parse(spec, seed, None).unwrap();
    sim::simulate(
        scheme(kind, 6),
        4096,
        4 << 20,
        cfg,
        &spec,
        &sim::SourceOptions::default(),
    )
    .unwrap()
}

#[test]
fn lazy_small_writes_beat_eager() {
    // RM2 over 4 disks (seed 002's array) and P+Q RAID6 over 8.
    for (s, min_ratio) in [
        (scheme(SchemeKind::Rm2, 4), 1.4),
        (scheme(SchemeKind::Raid6, 8), 1.25),
    ] {
        let name = s.describe();
        let r = small_write_speedup(
            s,
            Drive::SeagateSt3500320as,
            Scheduler::Fifo,
            64 << 10,
            3_000_000_000,
            4096,
            16,
            600,
        )
        .unwrap();
        eprintln!("{name}: {r:?} ratio {:.2}", r.ratio());
        assert!(
            r.ratio() >= min_ratio,
            "{name}: lazy {:.1} IOPS vs eager {:.1} (x{:.2}, want >= {min_ratio})",
            r.lazy_iops,
            r.eager_iops,
            r.ratio()
        );
    }
}

#[test]
fn lazy_writes_on_checked_members_end_flushed() {
    // Small enough for the in-memory checker (debug builds): every read compared with a
    // reference volume, every settled cycle's parity checked.
    let mut cfg = SimConfig::new(Drive::SeagateSt3500320as.params());
    cfg.bpgl_capacity = 64;
    cfg.bpgl_idle_ns = 5_000_000;
    let r = run_lazy(
        SchemeKind::Rm2,
        cfg,
        "random:read=0.2:size=4K:qd=8:requests=400",
        3,
    );
    if cfg!(debug_assertions) {
        assert_eq!(r.check, CheckMode::MemArray);
    }
    let l = r.lazy.clone().expect("a lazy run reports its list");
    assert!(l.deferrals > 0 && l.flush_plans > 0, "{l:?}");
    assert!(l.max_len <= 64, "bound kept: {l:?}");
    assert!(
        l.forced_flushes > 0,
        "a 64-entry list fills under 400 writes: {l:?}"
    );
    assert_eq!(l.left, 0, "the run ends idle, everything flushed");
    assert_eq!(r.requests, 400);
}

/// The list kept on the members, as the engine keeps it: records written to the first
/// `copies_for` members only, fewer records than writes (shared), and the writes slower than
/// with the list in controller memory.
#[test]
fn the_list_on_the_members_costs_shared_records() {
    let run = |records: LazyModel| {
        let mut cfg = SimConfig::new(Drive::SeagateSt3500320as.params());
        cfg.lazy_model = records;
        cfg.bpgl_capacity = 256;
        run_lazy(
            SchemeKind::Rm2,
            cfg,
            "random:read=0:size=4K:qd=8:requests=400",
            9,
        )
    };
    let members = run(LazyModel::Engine);
    let controller = run(LazyModel::Controller);
    let l = members.lazy.clone().expect("lazy report");
    let copies = raidcore::record::copies_for(6, 2);
    assert_eq!(copies, 3);
    let meta: Vec<u64> = members.per_disk.iter().map(|d| d.meta_writes).collect();
    assert!(l.records > 0, "{l:?}");
    assert_eq!(
        meta,
        [vec![l.records; copies], vec![0; 6 - copies]].concat(),
        "each record once on each of the first {copies} members"
    );
    assert!(
        l.records < 400,
        "{} records for 400 writes: concurrent writes share them",
        l.records
    );
    let c = controller.lazy.clone().expect("lazy report");
    assert_eq!(c.records, 0);
    assert!(controller.per_disk.iter().all(|d| d.meta_writes == 0));
    assert_eq!((members.requests, controller.requests), (400, 400));
    let mean = |r: &sim::Report| r.phase(sim::Phase::Normal).mean_ms;
    assert!(
        mean(&members) > mean(&controller),
        "records cost time: {:.2} ms against {:.2} ms",
        mean(&members),
        mean(&controller)
    );
}

#[test]
fn a_failure_flushes_the_list_first() {
    let mut cfg = SimConfig::new(Drive::SeagateSt3500320as.params());
    cfg.failure = Some(Failure {
        member: 2,
        at_ns: 300_000_000,
    });
    cfg.rebuild_delay_ns = None;
    cfg.bpgl_idle_ns = 10_000_000_000; // never idle during the run
    let r = run_lazy(
        SchemeKind::Raid6,
        cfg,
        "random:read=0.3:size=4K:qd=8:requests=300",
        5,
    );
    let l = r.lazy.expect("lazy report");
    assert!(l.forced_flushes > 0, "the failure forced a flush: {l:?}");
    assert_eq!(l.idle_flushes, 0, "{l:?}");
    assert_eq!(r.requests_failed, 0);
    assert_eq!(l.left, 0);
}

#[test]
fn figure7_quick_has_every_point_and_the_seed_s_ordering() {
    let rows = sim::lpu::figure7(&sim::lpu::Fig7Options {
        quick: true,
        ..Default::default()
    })
    .unwrap();
    // 4 workloads x 4 queue depths x 3 arrays.
    assert_eq!(rows.len(), 48);
    let get = |w: &str, qd: u32, s: &str| {
        rows.iter()
            .find(|r| r.workload == w && r.qd == qd && r.scheme.starts_with(s))
            .unwrap_or_else(|| panic!("{w} qd {qd} {s}"))
    };
    for r in &rows {
        assert!(r.iops > 0.0 && r.forced_flushes == 0, "{r:?}");
    }
    // The seed's qualitative findings at a deep queue: reads gain from the fourth disk, and
    // lazy parity lifts RM2's small writes above both RM2 and RAID5.
    let w = "4K random write";
    assert!(get(w, 16, "RM2+LPU").iops > 1.4 * get(w, 16, "RM2 (").iops);
    assert!(get(w, 16, "RM2+LPU").iops > get(w, 16, "RAID5").iops);
    assert!(get("4K random read", 32, "RM2 (").iops > get("4K random read", 32, "RAID5").iops);
}

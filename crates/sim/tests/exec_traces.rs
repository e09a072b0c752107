//! Every trace of the repository's `data/traces` (and the real SNIA samples when
//! `RAIDFORGE_TRACES` names a folder holding them) replays on RAID5 and RAID+, and a malformed
//! line stops the run with an error naming the file and the line (or is skipped and counted
//! when lenient).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use layout::{Params, Scheme, SchemeKind};
use raidcore::{RebuildOrder, SpeedLimits};
use sim::{
    simulate, Drive, Failure, Phase, Report, SimConfig, SimError, SourceOptions, WorkloadSpec,
};

const SEC: u64 = 1_000_000_000;

/// The traces to replay: every trace of `data/traces` (all five must be there), then the real
/// SNIA samples of `$RAIDFORGE_TRACES` when it is set.
fn traces() -> Vec<PathBuf> {
    let dir = sim::repository_traces_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "csv" || e == "mqsim"))
        .collect();
    files.sort();
    let names: Vec<&str> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "synthetic-msr.csv",
            "synthetic-systor17.csv",
            "synthetic-tencent-cbs.csv",
            "tpcc-small.mqsim",
            "websearch-head.mqsim"
        ],
        "the traces of {}",
        dir.display()
    );
    if let Some(real) = std::env::var_os("RAIDFORGE_TRACES").filter(|d| !d.is_empty()) {
        let real = PathBuf::from(real);
        let samples: Vec<PathBuf> = [
            "msr-hm_0-head1000.csv",
            "tencent-cbs-sample.csv",
            "systor17-sample-a.csv",
            "systor17-sample-b.csv",
        ]
        .iter()
        .map(|n| real.join(n))
        .filter(|p| p.is_file())
        .collect();
        assert!(
            !samples.is_empty(),
            "RAIDFORGE_TRACES={} holds none of the SNIA samples",
            real.display()
        );
        files.extend(samples);
    }
    files
}

fn raid5() -> Arc<dyn Scheme> {
    layout::build(
        SchemeKind::Raid5,
        &Params {
            disks: Some(5),
            ..Params::default()
        },
    )
    .unwrap()
}

fn raidplus() -> Arc<dyn Scheme> {
    layout::build(
        SchemeKind::RaidPlus,
        &Params {
            disks: Some(7),
            width: Some(3),
            ..Params::default()
        },
    )
    .unwrap()
}

fn replay(scheme: Arc<dyn Scheme>, path: &Path, opts: &SourceOptions) -> Result<Report, SimError> {
    let mut cfg = SimConfig::new(Drive::SeagateSt3500320as.params());
    // A failure a short way in, so the prefix is replayed healthy, degraded and rebuilding.
    cfg.failure = Some(Failure {
        member: 1,
        at_ns: SEC / 5,
    });
    cfg.rebuild_order = RebuildOrder::Parallel { max_in_flight: 2 };
    cfg.speed = SpeedLimits {
        min_bytes_per_sec: 8 << 20,
        max_bytes_per_sec: 0,
    };
    let spec = WorkloadSpec::Trace {
        path: path.to_path_buf(),
        format: None,
    };
    simulate(scheme, 64 << 10, 8 << 20, cfg, &spec, opts)
}

#[test]
fn every_trace_replays_on_raid5_and_raidplus() {
    let files = traces();
    // A bounded prefix of each (the Tencent sample alone has 50,000 lines).
    let opts = SourceOptions {
        limit: Some(1500),
        ..SourceOptions::default()
    };
    for path in &files {
        // Every request of the prefix is replayed (the reader's count, checked on its own in
        // tests/traces.rs).
        let in_trace = sim::trace::open(path, None, sim::ReadOptions::default())
            .unwrap()
            .count() as u64;
        let want = in_trace.min(1500);
        assert!(want > 0, "{}: empty", path.display());
        for scheme in [raid5(), raidplus()] {
            let name = scheme.name();
            let r = replay(scheme, path, &opts)
                .unwrap_or_else(|e| panic!("{} on {name}: {e}", path.display()));
            eprintln!(
                "{} on {name}: {} requests, normal mean {:.2} ms, {} member I/Os",
                path.file_name().unwrap().to_string_lossy(),
                r.requests,
                r.phase(Phase::Normal).mean_ms,
                r.member_ios
            );
            assert_eq!(r.requests, want, "{} on {name}", path.display());
            assert_eq!(r.requests_failed, 0);
            assert!(
                r.rebuild_time_s().is_some(),
                "{}: rebuild unfinished",
                path.display()
            );
        }
    }
}

/// A trace file (format named or detected) on an 8 MiB-member RAID5 with 64 KiB chunks.
fn small_raid5(
    path: &Path,
    format: Option<sim::TraceFormat>,
    cfg: SimConfig,
    opts: &SourceOptions,
) -> Result<Report, SimError> {
    let spec = WorkloadSpec::Trace {
        path: path.to_path_buf(),
        format,
    };
    simulate(raid5(), 64 << 10, 8 << 20, cfg, &spec, opts)
}

fn write_trace(name: &str, text: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("raidforge-sim-{}-{name}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn malformed_line_names_file_and_line_or_is_skipped_when_lenient() {
    let path = write_trace(
        "bad.spc",
        "0,2048,4096,w,0.000000\n1,4096,512,r,0.002500\n0,notanumber,4096,r,0.003\n0,8,4096,r,0.004\n",
    );
    // Named, and detected from the content: the bad line is among the ones format detection
    // reads, and must not hide the format.
    for format in [Some(sim::TraceFormat::Spc), None] {
        let cfg = SimConfig::new(Drive::SeagateSt3500320as.params());
        let err = small_raid5(&path, format, cfg.clone(), &SourceOptions::default()).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("{}:3", path.display())),
            "error does not name file and line ({format:?}): {msg}"
        );
        assert!(msg.contains("notanumber"), "{msg}");

        let lenient = SourceOptions {
            lenient: true,
            ..SourceOptions::default()
        };
        let r = small_raid5(&path, format, cfg, &lenient).unwrap();
        assert_eq!((r.requests, r.requests_skipped), (3, 1), "{format:?}");
    }
    std::fs::remove_file(path).unwrap();
}

#[test]
fn looped_traces_replay_every_pass_later_in_time() {
    let path = write_trace(
        "loop.spc",
        "0,0,4096,r,0.000\n0,64,4096,w,0.010\n0,128,8192,r,0.020\n",
    );
    let cfg = SimConfig::new(Drive::IntelX25e64gb.params());
    let once = small_raid5(&path, None, cfg.clone(), &SourceOptions::default()).unwrap();
    let looped = small_raid5(
        &path,
        None,
        cfg,
        &SourceOptions {
            loops: 4,
            ..SourceOptions::default()
        },
    )
    .unwrap();
    assert_eq!(once.requests, 3);
    assert_eq!(looped.requests, 12);
    // Each pass starts after the previous one (20 ms of trace plus a 6.7 ms mean gap).
    assert!(looped.sim_time_s > 3.0 * 0.0267, "{}", looped.sim_time_s);
    std::fs::remove_file(path).unwrap();
}

//! Lazy against eager small-write throughput, and seed 002's Figure 7, on simulated disks.
//! `cargo run --release -p sim --example lpu_speedup [-- --fig7 [--quick]] [--debug]`
//! (`--debug`: per-disk load of RM2 over 8 disks, eager and lazy).

use sim::lpu::{figure7, small_write_speedup, Fig7Options};
use sim::Drive;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let d = |n: usize| layout::Params {
        disks: Some(n),
        ..Default::default()
    };
    for (name, kind, n) in [
        ("rm2 N=4", layout::SchemeKind::Rm2, 4),
        ("rm2 N=8", layout::SchemeKind::Rm2, 8),
        ("raid6 6 disks", layout::SchemeKind::Raid6, 6),
        ("raid6 8 disks", layout::SchemeKind::Raid6, 8),
    ] {
        for (sched, sn) in [
            (sim::Scheduler::Fifo, "fifo"),
            (sim::Scheduler::ELEVATOR, "sptf"),
        ] {
            for qd in [8u32, 16, 32] {
                let s = layout::build(kind, &d(n)).unwrap();
                let r = small_write_speedup(
                    s,
                    Drive::SeagateSt3500320as,
                    sched,
                    64 << 10,
                    3_000_000_000,
                    4096,
                    qd,
                    3000,
                )
                .unwrap();
                println!(
                "{name:>14} {sn} qd {qd:>2}: eager {:>7.1} IOPS ({:.2} member I/Os per write), lazy {:>7.1} IOPS ({:.2}), x{:.2}",
                r.eager_iops, r.eager_ios_per_write, r.lazy_iops, r.lazy_ios_per_write, r.ratio()
            );
            }
        }
    }
    if args.iter().any(|a| a == "--debug") {
        let s = layout::build(layout::SchemeKind::Rm2, &d(8)).unwrap();
        let mut cfg = sim::SimConfig::new(Drive::SeagateSt3500320as.params());
        cfg.mem_check_max_bytes = 0;
        for p in [raidcore::ParityPolicy::Eager, raidcore::ParityPolicy::Lazy] {
            let r = sim::lpu::run_closed_loop(
                s.clone(),
                64 << 10,
                3_000_000_000,
                cfg.clone(),
                p,
                false,
                4096,
                8,
                3000,
                7,
            )
            .unwrap();
            println!(
                "{:?} iops {} sim_time {} ios {}",
                r.lazy, r.throughput_iops, r.sim_time_s, r.member_ios
            );
            for d in &r.per_disk {
                println!("  busy {:.2} r {} w {}", d.busy_s, d.reads, d.writes);
            }
            println!("  {:?}", r.phases[0]);
        }
    }
    if args.iter().any(|a| a == "--fig7") {
        let quick = args.iter().any(|a| a == "--quick");
        let t = std::time::Instant::now();
        let rows = figure7(&Fig7Options {
            quick,
            ..Default::default()
        })
        .unwrap();
        for r in &rows {
            println!(
                "{:>18} qd {:>2} {:>18}: {:>8.1} IOPS {:>7.2} MB/s {:>5.2} I/Os/req forced {}",
                r.workload,
                r.qd,
                r.scheme,
                r.iops,
                r.mb_per_s,
                r.member_ios_per_request,
                r.forced_flushes
            );
        }
        eprintln!("figure 7 in {:.1} s", t.elapsed().as_secs_f64());
    }
}

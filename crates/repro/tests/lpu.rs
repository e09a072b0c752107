//! `raidforge reproduce lpu --quick` as CI runs it: the MTTDL figures (5 and 6) with the seed's
//! parameters, every claim holding, every row within 20 % of the seed or on the list below, and
//! the documented JSON shape; Figure 7's throughput points on the simulator.

mod common;

use common::{experiment, row, Differs};

/// Rows allowed to differ from the seed (see `common::Differs`).
const ALLOWED: &[Differs] = &[
    Differs {
        experiment: "fig6",
        label: "* disks RAID6+LPU / RAID6",
        lo: 1.5,
        hi: 8.3,
        why: "with the seed's rates updates are pending 3 % of the time and flushed in under \
              an hour; its 0.2x needs longer exposure than that",
    },
    Differs {
        experiment: "fig6",
        label: "* disks RAID6+LPU / RAID5",
        lo: 0.085,
        hi: 0.76,
        why: "the seed's 0.2x of RAID6 and 1000x of RAID5 cannot both hold (they imply RAID6 \
              at 5000x RAID5, far above any standard chain with its MTTF and MTTR)",
    },
    Differs {
        experiment: "fig7",
        label: "4K random write qd * RM2+LPU / RM2 throughput",
        lo: 0.5,
        // 5 member I/Os per eager RM2 small write on 4 disks against 3 lazy ones: 1.67x at
        // most, 0.83 of the seed's 2x.
        hi: 0.84,
        why: "the seed's 'about 2x' is a sentence; member I/O counts cap the gain at 1.67x",
    },
];

#[test]
fn quick_run_upholds_every_claim() {
    let r = common::check_seed("lpu", ALLOWED);
    let ids: Vec<&str> = r.experiments.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, ["fig5", "fig6", "fig7"]);
    let f5 = experiment(&r, "fig5");
    let f6 = experiment(&r, "fig6");
    for n in 4..=16 {
        let r5 = row(f5, &format!("{n} disks RAID5 MTTDL")).ours;
        let r6 = row(f5, &format!("{n} disks RAID6 MTTDL")).ours;
        let lp = row(f6, &format!("{n} disks RAID6+LPU MTTDL")).ours;
        assert!(r5 < lp && lp < r6, "n={n}");
        // RAID5 ~ MTTF^2 / (n (n-1) MTTR) with the seed's 30,000 h and 24 h.
        let approx = 30_000f64.powi(2) / ((n * (n - 1)) as f64 * 24.0);
        assert!(
            ((r5 - approx) / approx).abs() < 0.05,
            "n={n}: {r5} vs {approx}"
        );
    }
    // The seed's ratios sit beside ours, within an order of magnitude.
    for n in [4, 8] {
        let a = row(f6, &format!("{n} disks RAID6+LPU / RAID6"));
        assert_eq!(a.published, Some(0.2));
        assert!(a.ours > 0.02 && a.ours < 2.0, "{}", a.ours);
        let b = row(f6, &format!("{n} disks RAID6+LPU / RAID5"));
        assert_eq!(b.published, Some(1000.0));
        assert!(b.ours > 100.0 && b.ours < 10_000.0, "{}", b.ours);
    }
    // Figure 7: every (workload, queue depth, array) point is there with a positive rate.
    let f7 = experiment(&r, "fig7");
    // RM2 and RM2+LPU read alike: drawn apart and said to be, not one hidden under the other;
    // the seed's "about 2x" on writes is a note on the write plot.
    let read = common::texts_of(&f7.plots[0].svg, "note").join(" ");
    assert!(
        read.contains("RM2 (4 disks) and RM2+LPU (4 disks) overlap"),
        "{read}"
    );
    let write = common::texts_of(&f7.plots[1].svg, "note").join(" ");
    assert!(write.contains("paper: 4K random write qd 16"), "{write}");
    for w in [
        "4K random read",
        "4K random write",
        "128K random read",
        "128K random write",
    ] {
        for qd in [1, 4, 16, 32] {
            for s in ["RAID5 (3 disks)", "RM2 (4 disks)", "RM2+LPU (4 disks)"] {
                let x = row(f7, &format!("{w} qd {qd} {s} IOPS")).ours;
                assert!(x > 0.0 && x.is_finite(), "{w} qd {qd} {s}: {x}");
            }
        }
    }
    // At queue depth 1 nothing is deferred usefully: lazy and eager RM2 within 10 %.
    let a = row(f7, "4K random write qd 1 RM2+LPU (4 disks) IOPS").ours;
    let b = row(f7, "4K random write qd 1 RM2 (4 disks) IOPS").ours;
    assert!((a / b - 1.0).abs() < 0.1, "{a} vs {b}");
}

//! `raidforge reproduce raid4s --quick` as CI runs it: every claim holds (RAID4S beats RAID5 on
//! 4-64 KiB random writes, ...) or is on the list below with its reason, every row within 20 %
//! of the thesis (none is allowed to differ), and the JSON has the documented shape.

mod common;

use common::{experiment, row, Fails};

/// Why the 128 KiB modthresh claims fail (the report says it at length).
const MT128: &str = "an aligned 128 KiB write costs four disk I/Os under RMW and RCW alike; \
                     RMW reuses its two disks back to back, so modthresh gains nothing there";

/// Claims of the thesis the quick run does not uphold (see `common::Fails`).
const FAILS: &[Fails] = &[
    Fails {
        experiment: "fig3.16",
        claim: "At larger sizes RAIDF5 and RAID0 come closer*",
        why: "the X25-E model writes large requests at its datasheet rate on all five SSDs",
    },
    Fails {
        experiment: "fig3.25",
        claim: "RAID4S has the highest throughput up to 90 % reads",
        why: "RAID5S's SSD serves its fifth of the reads much faster than a disk",
    },
    Fails {
        experiment: "fig4.11",
        claim: "RAID5S overtakes RAID4S-modthresh past 128 KiB",
        why: "one SSD in RAID5S does not speed up reconstruct-writes bound by the disks",
    },
    Fails {
        experiment: "fig4.12",
        claim: "Just past 128 KiB, always-RMW*",
        why: "past 128 KiB an RMW reads three disks where an RCW reads one",
    },
    Fails {
        experiment: "fig4.13",
        claim: "modthresh is faster at 128 KiB",
        why: MT128,
    },
    Fails {
        experiment: "fig4.15",
        claim: "modthresh costs nothing at any size*",
        why: MT128,
    },
];

#[test]
fn quick_run_upholds_every_claim() {
    let r = common::check_seed_with("raid4s", &[], FAILS);

    // Table 3.3 comes from plan counts: 4/W and 2/(W-1) exactly.
    let t = experiment(&r, "table3.3");
    for w in [3usize, 4, 5, 10, 50, 100, 200, 300] {
        let a = row(t, &format!("width {w} RAID4 I/Os per disk")).ours;
        let b = row(t, &format!("width {w} RAID4S I/Os per disk")).ours;
        assert!((a - 4.0 / w as f64).abs() < 1e-12, "width {w}: {a}");
        assert!((b - 2.0 / (w as f64 - 1.0)).abs() < 1e-12, "width {w}: {b}");
    }
    assert!((row(t, "width 5 reduction %").ours - 37.5).abs() < 1e-9);

    // Figure 3.14: the headline ratio and RAID4S's lead at every small size.
    let f = experiment(&r, "fig3.14");
    for k in [4, 8, 16, 32, 64] {
        let s = row(f, &format!("RAID4S {k} KiB MB/s")).ours;
        let five = row(f, &format!("RAID5 {k} KiB MB/s")).ours;
        assert!(s > 1.2 * five, "{k} KiB: RAID4S {s} vs RAID5 {five}");
    }
    let full = row(f, "RAID4S / RAID5 256 KiB").ours;
    assert!(
        (full - 1.0).abs() < 0.05,
        "full-stripe writes equal: {full}"
    );
    // The plot shows the thesis's MB/s (RAID5 at 64 KiB, RAID4S at 64 and 128 KiB) as markers
    // beside ours, the ratios it cannot place as notes, and RAID5S, within a few pixels of
    // RAID5 everywhere, is drawn apart from it and said to be.
    let mut m = common::published_markers(&f.plots[0].svg);
    m.sort_by(f64::total_cmp);
    assert_eq!(m, vec![8.0, 14.0, 17.0]);
    let notes = common::texts_of(&f.plots[0].svg, "note").join(" ");
    assert!(notes.contains("paper: RAID4S / RAID4 peak"), "{notes}");
    assert!(notes.contains("RAID5 and RAID5S overlap"), "{notes}");
    assert_eq!(common::published_markers(&f.plots[1].svg), vec![1.6]);
    // Table 3.3: both published series, eight widths each.
    assert_eq!(
        common::published_markers(&experiment(&r, "table3.3").plots[0].svg).len(),
        16
    );
}

#[test]
fn plan_count_figures_are_exact() {
    let r = repro::reproduce(
        repro::seed("raid4s").unwrap(),
        &repro::Opts {
            quick: true,
            traces_dir: None,
        },
        &mut |_| {},
    )
    .unwrap();
    // Figure 3.2: 2(m + 1) I/Os per read-modify-write; a reconstruct-write costs N = 5.
    let f = experiment(&r, "fig3.2");
    for m in 1..=4 {
        assert_eq!(
            row(f, &format!("m={m} read-modify-write I/Os")).ours,
            2.0 * (m as f64 + 1.0)
        );
        assert_eq!(row(f, &format!("m={m} reconstruct-write I/Os")).ours, 5.0);
    }
    // Figure 4.5: MD's read tallies, exactly the thesis's.
    let f = experiment(&r, "fig4.5");
    for (k, rmw, rcw) in [(64, 2.0, 3.0), (128, 3.0, 2.0), (192, 4.0, 1.0)] {
        assert_eq!(row(f, &format!("{k} KiB rmw reads")).ours, rmw);
        assert_eq!(row(f, &format!("{k} KiB rcw reads")).ours, rcw);
    }
    // Figures 3.19-3.24 are per-write expectations: RAID4's parity device reads and writes
    // once per 64 KiB write.
    assert_eq!(
        row(
            experiment(&r, "fig3.19"),
            "RAID4/RAID4S device 4 reads per write"
        )
        .ours,
        1.0
    );
    assert_eq!(
        row(
            experiment(&r, "fig3.24"),
            "RAID5/RAID5S device 2 writes per write"
        )
        .ours,
        1.0
    );
    // The cost model is Figure 3.6's prices.
    let c = experiment(&r, "fig3.7");
    assert!((row(c, "RAID4S cost").ours - (4.0 * 69.99 + 434.99)).abs() < 1e-9);
}

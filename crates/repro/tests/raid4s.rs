//! `raidforge reproduce raid4s --quick` as CI runs it: every claim holds (RAID4S beats RAID5 on
//! 4-64 KiB random writes, ...), every row within 20 % of the thesis (none is allowed to differ),
//! and the JSON has the documented shape.

mod common;

use common::{experiment, row};

#[test]
fn quick_run_upholds_every_claim() {
    let r = common::check_seed("raid4s", &[]);
    let ids: Vec<&str> = r.experiments.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, ["table3.3", "fig3.14", "fig4.1", "fig4.10"]);

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
}

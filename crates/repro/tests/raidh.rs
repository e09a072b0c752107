//! `raidforge reproduce raidh --quick` as CI runs it: every claim holds (Table 6.1 size-1 and
//! size-2 rows within 0.5 percentage points), every row off by more than the tolerance says
//! why, and the JSON has the documented shape.

mod common;

use common::{experiment, row};

#[test]
fn quick_run_upholds_every_claim() {
    let r = common::check_seed("raidh");
    let t = experiment(&r, "table6.1");
    for size in 1..=4 {
        for kind in ["reads", "writes"] {
            let total: f64 = (0..5)
                .map(|d| row(t, &format!("size {size} device {d} {kind} %")).ours)
                .sum();
            assert!((total - 100.0).abs() < 1e-9, "size {size} {kind}: {total}");
        }
    }
    for size in 1..=2 {
        for d in 0..5 {
            for kind in ["reads", "writes"] {
                let x = row(t, &format!("size {size} device {d} {kind} %"));
                let p = x.published.expect("published");
                assert!((x.ours - p).abs() <= 0.5, "{}: {} vs {p}", x.label, x.ours);
            }
        }
    }
    let m = experiment(&r, "model6.5");
    let g3 = row(m, "F=3 throughput gain over RAID5 %").ours;
    let g05 = row(m, "F=0.5 throughput gain over RAID5 %").ours;
    assert!(g3 > g05 && g05 > 0.0, "{g05} {g3}");
}

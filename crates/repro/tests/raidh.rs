//! `raidforge reproduce raidh --quick` as CI runs it: every claim holds (Table 6.1 size-1 and
//! size-2 rows within 0.5 percentage points), every row within 20 % of the thesis or on
//! the list below, and the JSON has the documented shape.

mod common;

use common::{experiment, row, Differs};

/// Rows of the quick run allowed to differ from the thesis (see `common::Differs`).
const ALLOWED: &[Differs] = &[Differs {
    experiment: "model6.5",
    label: "F=0.5 throughput gain over RAID5 %",
    lo: 0.27,
    hi: 1.2,
    why: "at queue depth 10 the slow disks still idle now and then, so the model's no-idle \
          gain is not all had; a few percent either way",
}];

#[test]
fn quick_run_upholds_every_claim() {
    let r = common::check_seed("raidh", ALLOWED);
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
